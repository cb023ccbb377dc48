package dev.sluice.cli;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code sluice serve} and {@code sluice gateway} refuse a bad configuration: one line, exit status 2, nothing started. */
class ServiceCommandsTest {
    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource(delimiter = '|', value = {
            "serve|not YAML|policies: [|:1: not valid YAML: ",
            "serve|no policies|store: memory|:1: policies: missing; at least one policy is needed",
            "serve|a bad limit|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [0/1s]|:5: policies[0].limits[0]: bad limit \"0/1s\": ",
            "serve|a bad glob|policies:\\n  - name: p\\n    match:\\n      path: /a**\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|:4: policies[0].match.path: bad glob \"/a**\": ** must be a whole segment, as in /api/**",
            "serve|an unreachable Redis|store: redis://127.0.0.1:1\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|:1: store redis://127.0.0.1:1: cannot connect: ",
            "gateway|an unreachable Cluster, at its line|store_timeout: 1s\\n# shared\\nstore: redis-cluster://:s3cret@127.0.0.1:1\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|:3: store redis-cluster://:****@127.0.0.1:1: cannot connect: ",
            "gateway|a bad CIDR|trusted_proxies: [10.0.0.0/40]\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|:1: trusted_proxies[0]: \"10.0.0.0/40\": an IPv4 network has at most /32",
            "gateway|a duplicate name|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|:6: policies[1].name: duplicate policy name \"p\" (first at line 2)",
    })
    void refusesABadConfiguration(String command, String problem, String yaml, String message) throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"), yaml.replace("\\n", "\n"));
        StringWriter err = new StringWriter();
        String[] args = command.equals("serve")
                ? new String[] {"serve", "--config", file.toString(), "--port", "0"}
                : new String[] {"gateway", "--upstream", "http://127.0.0.1:1", "--config", file.toString(), "--port", "0"};
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(args, new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).startsWith("error: " + file + message);
        assertThat(err.toString().lines()).hasSize(1);
        assertThat(out.toString()).isEmpty();
    }

    @ParameterizedTest(name = "{0} {1} {2}")
    @CsvSource(delimiter = '|', value = {
            "serve|--idle-timeout|500ms|--idle-timeout: expected a duration of at least 1s such as 30s, got \"500ms\"",
            "serve|--idle-timeout|soon|--idle-timeout: bad duration \"soon\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "serve|--idle-timeout|10|--idle-timeout: bad duration \"10\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "serve|--idle-timeout|4000d|--idle-timeout: duration \"4000d\" is too long (at most 3335d)",
            "gateway|--idle-timeout|0s|--idle-timeout: expected a duration of at least 1s such as 30s, got \"0s\"",
            "serve|--drain-timeout|10|--drain-timeout: bad duration \"10\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "gateway|--drain-timeout|-1s|--drain-timeout: bad duration \"-1s\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "serve|--stop-delay|5|--stop-delay: bad duration \"5\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "gateway|--stop-delay|later|--stop-delay: bad duration \"later\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "serve|--max-connections|0|--max-connections: expected at least 1, got 0",
            "gateway|--max-connections|-5|--max-connections: expected at least 1, got -5",
    })
    void refusesABadOptionBeforeStartingAnything(String command, String option, String value, String message)
            throws Exception {
        StringWriter err = new StringWriter();
        String[] args = command.equals("serve")
                ? new String[] {"serve", "--port", "0", option, value}
                : new String[] {"gateway", "--upstream", "http://127.0.0.1:1", "--port", "0", option, value};
        int status = Sluice.run(args, new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(),
                new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).isEqualTo("error: " + message + "\n");
    }

    /** No command at all: the error, then what the commands are, and exit status 2. */
    @org.junit.jupiter.api.Test
    void noCommandAtAllIsToldWithTheCommandsThereAre() {
        StringWriter err = new StringWriter();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(new String[0], new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(out.toString()).isEmpty();
        assertThat(err.toString()).startsWith("error: Missing required subcommand\n\nUsage: sluice [-hV] [COMMAND]\n")
                .contains("  serve ", "  gateway ", "  simulate ", "  check ");
    }

    /** An upstream that is the gateway's own port, on an address it listens on: refused before anything starts. */
    @ParameterizedTest(name = "{0} on {1}")
    @CsvSource({"http://localhost:18011,0.0.0.0", "http://127.0.0.1:18011,127.0.0.1", "http://[::1]:18011,0.0.0.0",
            "https://127.0.0.1:18011,0.0.0.0"})
    void refusesAnUpstreamThatIsTheGatewayItself(String upstream, String host) {
        StringWriter err = new StringWriter();
        int status = Sluice.run(new String[] {"gateway", "--upstream", upstream, "--host", host, "--port", "18011"},
                new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(), new PrintWriter(err, true));
        assertThat(err.toString()).isEqualTo("error: --upstream " + upstream + ": the gateway itself (--port 18011 on "
                + host + "): each request would be forwarded back to it, round and round\n");
        assertThat(status).isEqualTo(2);
    }

    /**
     * A Cluster seed that is not a Redis (an HTTP server, here one that answers each connection with a page): one
     * line that says so, and nothing else. A review found Lettuce's 30-line stack trace before it, and the line
     * itself full of {@code \x0a} and {@code \x09}.
     */
    @org.junit.jupiter.api.Test
    void aClusterSeedThatIsNotARedisIsToldInOneLineAlone() throws Exception {
        try (java.net.ServerSocket web = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
             dev.sluice.testkit.LogCapture lettuce = dev.sluice.testkit.LogCapture.of("io.lettuce")) {
            Thread answering = new Thread(() -> {
                while (!web.isClosed()) {
                    try (java.net.Socket client = web.accept()) {
                        client.getOutputStream().write("<html>not Redis</html>\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        client.getOutputStream().flush();
                        Thread.sleep(100);
                    } catch (java.io.IOException | InterruptedException e) {
                        return;
                    }
                }
            });
            answering.setDaemon(true);
            answering.start();
            int port = web.getLocalPort();
            Path file = Files.writeString(dir.resolve("sluice.yaml"), "store: redis-cluster://127.0.0.1:" + port
                    + "\npolicies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n");
            StringWriter err = new StringWriter();
            int status = Sluice.run(new String[] {"serve", "--config", file.toString(), "--port", "0"},
                    new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(), new PrintWriter(err, true));
            assertThat(status).isEqualTo(2);
            String seed = "[redis://127.0.0.1:" + port + "?timeout=2s]";
            assertThat(err.toString()).isEqualTo("error: " + file + ":1: store redis-cluster://127.0.0.1:" + port
                    + ": cannot connect: Cannot retrieve cluster partitions from " + seed + ": " + seed
                    + ": Unable to connect to [127.0.0.1/<unresolved>:" + port + "]: Invalid first byte: 60 (<) at"
                    + " buffer index 1 decoding using null\n");
            assertThat(lettuce.messages()).as("Lettuce's own log, while the store opened").isEmpty();
        }
    }

    /** An address this machine does not have is the host's fault, not the port's. */
    @org.junit.jupiter.api.Test
    void refusesAHostThatIsNotThisMachines() throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n");
        StringWriter err = new StringWriter();
        int status = Sluice.run(new String[] {"serve", "--config", file.toString(), "--host", "192.0.2.1", "--port", "0"},
                new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(), new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).startsWith("error: --host 192.0.2.1: not an address of this machine (");
    }

    /**
     * A review found a host that does not resolve, or none, blamed on --port: Netty's resolver wraps the
     * UnknownHostException, and the host was looked for at the end of the chain only.
     */
    @ParameterizedTest(name = "--host \"{0}\"")
    @CsvSource(delimiter = '|', value = {
            "999.1.1.1|error: --host 999.1.1.1: not an address of this machine (",
            "no-such-host.invalid|error: --host no-such-host.invalid: not an address of this machine (",
            "' '|error: --host: empty; name an address of this machine, or 0.0.0.0 for every interface",
    })
    void aHostThatIsNoAddressIsBlamedOnTheHost(String host, String message) throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n");
        StringWriter err = new StringWriter();
        int status = Sluice.run(new String[] {"serve", "--config", file.toString(), "--host", host, "--port", "0"},
                new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(), new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).startsWith(message);
    }

    @org.junit.jupiter.api.Test
    void refusesAGrpcPortThatIsTakenAndStopsWhatItStarted() throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n");
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            StringWriter err = new StringWriter();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int status = Sluice.run(new String[] {"serve", "--config", file.toString(), "--host", "127.0.0.1",
                    "--port", "0", "--grpc-port", String.valueOf(taken.getLocalPort())},
                    new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
            assertThat(status).isEqualTo(2);
            assertThat(err.toString()).startsWith("error: --grpc-port " + taken.getLocalPort()
                    + ": cannot listen on 127.0.0.1: ");
            assertThat(out.toString()).isEmpty();
        }
    }

    @org.junit.jupiter.api.Test
    void checkListsTheExamplesPoliciesWithoutStartingAnything() {
        Path example = Path.of(System.getProperty("user.dir")).getParent().resolve("examples/sluice.yaml");
        StringWriter err = new StringWriter();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(new String[] {"check", "--config", example.toString()},
                new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(status).isZero();
        assertThat(err.toString()).isEmpty();
        assertThat(out.toString().lines()).hasSize(10).first().isEqualTo(example + ": ok, 9 policies, store memory");
        assertThat(out.toString().lines()).contains(
                "  api-per-key: sliding-window [600/1m, 3600/1h], reject, key [header:X-API-Key, route], for path /api/**,"
                        + " methods [GET, POST]",
                "  envoy-trusted-address: fixed-window [1000/1s], reject, key [descriptor:remote_address], for Envoy"
                        + " domain edge descriptor [remote_address=10.0.0.1]",
                "  trial-per-host: sliding-log [1000/1m], shadow, key [host]",
                "  search-budget: token-bucket [100/1m refill=interval], reject, key [header:X-User], cost header:X-Cost,"
                        + " for path /search",
                "  export-throttle: gcra [10/1s burst=20], delay up to 2s, key [header:X-User], for path /export/*");
    }

    @org.junit.jupiter.api.Test
    void checkShowsACostOtherThanOneAndAPolicyThatPassesOverAMissingKeyPart() throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"), """
                policies:
                  - name: heavy
                    key: [header:X-User]
                    skip_if_missing: true
                    algorithm: gcra
                    limits: [10/1s]
                    cost: 3
                    reject_status: 503
                    max_keys: 2000
                """);
        StringWriter err = new StringWriter();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(new String[] {"check", "--config", file.toString()},
                new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(err.toString()).isEmpty();
        assertThat(status).isZero();
        assertThat(out.toString().lines()).containsExactly(file + ": ok, 1 policy, store memory",
                "  heavy: gcra [10/1s], reject, key [header:X-User], cost 3, rejects with 503, own store of 2000 keys,"
                        + " skip_if_missing");
    }

    @org.junit.jupiter.api.Test
    void checkRefusesABadFileWithItsMessage() throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"),
                "store: redis://127.0.0.1:1\npolicies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [10/0s]\n");
        StringWriter err = new StringWriter();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(new String[] {"check", "--config", file.toString()},
                new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).isEqualTo("error: " + file
                + ":6: policies[0].limits[0]: bad limit \"10/0s\": period must be > 0, got \"0s\"" + System.lineSeparator());
        assertThat(out.toString()).isEmpty();
    }
    /** An empty --config named the working directory, and the error named no option. */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"check", "serve", "gateway"})
    void refusesAnEmptyConfigNamingTheOption(String command) {
        StringWriter err = new StringWriter();
        String[] args = command.equals("gateway")
                ? new String[] {"gateway", "--upstream", "http://127.0.0.1:1", "--port", "0", "--config", ""}
                : command.equals("serve") ? new String[] {"serve", "--port", "0", "--config", ""}
                : new String[] {"check", "--config", ""};
        int status = Sluice.run(args, new ByteArrayInputStream(new byte[0]), new ByteArrayOutputStream(),
                new PrintWriter(err, true));
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).isEqualTo("error: --config: empty; name the configuration file\n");
    }

    /** A password in the store's URI is never printed: start-up lines, {@code sluice check}, /healthz share one form. */
    @org.junit.jupiter.api.Test
    void checkHidesTheRedisPassword() throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"),
                "store: redis://admin:s3cret@127.0.0.1:6379/2\npolicies:\n  - name: p\n    key: [ip]\n"
                        + "    algorithm: gcra\n    limits: [10/1s]\n");
        StringWriter err = new StringWriter();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = Sluice.run(new String[] {"check", "--config", file.toString()},
                new ByteArrayInputStream(new byte[0]), out, new PrintWriter(err, true));
        assertThat(status).isZero();
        assertThat(out.toString().lines().findFirst().orElseThrow())
                .isEqualTo(file + ": ok, 1 policy, store redis://admin:****@127.0.0.1:6379/2");
        assertThat(out.toString() + err).doesNotContain("s3cret");
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource(delimiter = '|', value = {
            "memory|memory",
            "redis://127.0.0.1:6379|redis://127.0.0.1:6379",
            "redis://s3cret@10.0.0.1:6379|redis://****@10.0.0.1:6379",
            "redis://:s3cret@10.0.0.1:6379/1|redis://:****@10.0.0.1:6379/1",
            "redis://admin:p@ss:w0rd@10.0.0.1|redis://admin:****@10.0.0.1",
            "redis://:pa/ss@10.0.0.1:6379/2|redis://:****@10.0.0.1:6379/2",
            "admin:s3cret@10.0.0.1:6379|admin:****@10.0.0.1:6379",
            "redis-cluster://10.0.0.1:7000,10.0.0.2:7000|redis-cluster://10.0.0.1:7000,10.0.0.2:7000"})
    void aStoreIsShownWithoutItsPassword(String store, String shown) {
        assertThat(dev.sluice.redis.RedisStore.shown(store)).isEqualTo(shown);
    }
}
