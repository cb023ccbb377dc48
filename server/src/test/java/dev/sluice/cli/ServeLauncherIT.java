package dev.sluice.cli;

import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code bin/sluice serve} as a user runs it: the example configuration, a bad one, a real request, and a real gRPC
 * call to Envoy's rate limit service.
 */
class ServeLauncherIT {
    private static final Path ROOT = Path.of(System.getProperty("user.dir")).getParent();

    @TempDir
    Path dir;

    @Test
    void servesTheExampleAndSaysWhereAndHowToTryIt() throws Exception {
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0")
                .directory(dir.toFile()).redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String listening = out.readLine();
            String hint = out.readLine();
            Matcher where = Pattern.compile("sluice: serving 9 policies from .*examples/sluice.yaml on http://localhost:(\\d+) \\(store: memory\\)")
                    .matcher(listening);
            assertThat(where.matches()).as(listening).isTrue();
            int port = Integer.parseInt(where.group(1));
            assertThat(hint).isEqualTo("try:    curl -si -X POST localhost:" + port
                    + "/v1/check -d '{\"policy\":\"api-per-key\",\"key\":\"alice\"}'");
            HttpResponse<String> answer = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create("http://localhost:" + port + "/v1/check"))
                            .POST(HttpRequest.BodyPublishers.ofString("{\"policy\":\"login-per-ip\",\"key\":\"10.0.0.7\"}"))
                            .build(), HttpResponse.BodyHandlers.ofString());
            assertThat(answer.statusCode()).isEqualTo(200);
            assertThat(answer.body()).contains("\"policy\":\"login-per-ip\",\"limit\":5,\"remaining\":4");
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    /**
     * {@code --stop-delay}: asked to stop, the server says so on its output and in {@code /healthz} (503), and goes on
     * serving new connections for that long, so that Kubernetes and load balancers take it out before it takes none;
     * then it ends. A past weakness: every port refused new connections at once, and each rollout reset the clients
     * that came before the endpoints were updated (a review from Kubernetes' side).
     */
    @Test
    void aStopDelayKeepsServingWhileHealthSaysStopping() throws Exception {
        Path config = Files.copy(ROOT.resolve("examples/sluice.yaml"), dir.resolve("sluice.yaml"));
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--config", config.toString(), "--stop-delay", "10s").directory(dir.toFile()).redirectErrorStream(true)
                .start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            Matcher where = Pattern.compile("sluice: serving .* on http://localhost:(\\d+) .*").matcher(out.readLine());
            assertThat(where.matches()).isTrue();
            String base = "http://localhost:" + where.group(1);
            HttpClient client = HttpClient.newHttpClient();
            assertThat(client.send(HttpRequest.newBuilder(URI.create(base + "/healthz")).build(),
                    HttpResponse.BodyHandlers.ofString()).statusCode()).isEqualTo(200);
            process.toHandle().destroy(); // SIGTERM (Process.destroy would close the streams the test reads)
            String said;
            do {
                said = out.readLine();
            } while (said != null && !said.startsWith("sluice: asked to stop"));
            assertThat(said).isEqualTo("sluice: asked to stop: serving everyone for 10s more (health checks answer that it"
                    + " is stopping: /healthz 503); then no new connection, and up to 20s for the requests under way");
            // a client of its own: a new connection, as a load balancer's next one
            HttpResponse<String> health = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create(base + "/healthz")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(health.statusCode()).isEqualTo(503);
            assertThat(health.body()).contains("\"status\":\"stopping\"");
            HttpResponse<String> served = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base
                    + "/v1/check")).POST(HttpRequest.BodyPublishers.ofString(
                    "{\"policy\":\"login-per-ip\",\"key\":\"10.0.0.8\"}")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(served.statusCode()).as("still served").isEqualTo(200);
            // and what it logs meanwhile still reaches the log: a past weakness, the JDK's own shutdown hook closed
            // the log's handlers at the signal
            replace(config, "policies: [oops\n");
            do {
                said = out.readLine();
            } while (said != null && !said.contains(config + ":2: not valid YAML"));
            assertThat(said).as("the refused edit, logged while stopping").isNotNull().contains(" SEVERE sluice: ")
                    .endsWith("(the last good configuration stays in force)");
            // the delay is long enough for the two requests, the edit and the watcher's two looks on a loaded machine
            assertThat(process.waitFor(40, TimeUnit.SECONDS)).as("ends after the delay").isTrue();
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    /** A SLUICE_HOME without the example configuration is told by its path, not passed over for the current directory. */
    @Test
    void aSluiceHomeWithoutItsConfigurationIsNamed() throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        ProcessBuilder builder = new ProcessBuilder(java, "-jar", ROOT.resolve("server/target/sluice.jar").toString(), "check")
                .directory(ROOT.toFile()).redirectErrorStream(true); // where examples/sluice.yaml is
        builder.environment().put("SLUICE_HOME", dir.resolve("nowhere").toString());
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        assertThat(output).isEqualTo("error: " + dir.resolve("nowhere/examples/sluice.yaml") + ": no such file\n");
        assertThat(process.exitValue()).isEqualTo(2);
    }

    @Test
    void refusesToStartOnABadFileNamingLineAndField() throws Exception {
        Path config = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [10/0s]\n");
        Process process = new ProcessBuilder(List.of(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--config", config.toString())).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).isEqualTo(2);
        assertThat(output).isEqualTo("error: " + config
                + ":5: policies[0].limits[0]: bad limit \"10/0s\": period must be > 0, got \"0s\"\n");
    }

    @Test
    void answersEnvoysRateLimitCallsOnTheGrpcPort() throws Exception {
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--grpc-port", "0").directory(dir.toFile()).redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String envoyLine = null;
            for (int i = 0; i < 4; i++) {
                envoyLine = out.readLine();
            }
            Matcher where = Pattern.compile("sluice: Envoy's rate limit service \\(gRPC\\) on localhost:(\\d+)").matcher(envoyLine);
            assertThat(where.matches()).as(envoyLine).isTrue();
            ManagedChannel channel = NettyChannelBuilder
                    .forAddress("localhost", Integer.parseInt(where.group(1))).usePlaintext().build();
            try {
                var answer = RateLimitServiceGrpc.newBlockingStub(channel)
                        .withDeadlineAfter(20, TimeUnit.SECONDS)
                        .shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                                .addDescriptors(RateLimitDescriptor.newBuilder()
                                        .addEntries(RateLimitDescriptor.Entry
                                                .newBuilder().setKey("remote_address").setValue("10.0.0.7")))
                                .build());
                assertThat(answer.getOverallCode().name()).isEqualTo("OK");
                assertThat(answer.getStatuses(0).getCurrentLimit().getName()).isEqualTo("envoy-per-address");
                assertThat(answer.getStatuses(0).getCurrentLimit().getRequestsPerUnit()).isEqualTo(100);
                assertThat(answer.getStatuses(0).getCurrentLimit().getUnit().name()).isEqualTo("SECOND");
                assertThat(answer.getStatuses(0).getLimitRemaining()).isEqualTo(99);
            } finally {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    /**
     * {@code sluice serve --config FILE} watches its file: a good edit is in force within seconds and the counters
     * of an unchanged policy go on; a bad edit is reported on the process's output with file, line and field, and
     * the last good configuration keeps deciding.
     */
    @Test
    void picksUpAGoodEditWhileRunningAndKeepsTheLastGoodOneOnABadEdit() throws Exception {
        // gcra: 3/1h gives one back every 20 minutes, so no window can start afresh during the test
        String kept = "policies:\n  - name: kept\n    key: [ip]\n    algorithm: gcra\n    limits: [3/1h]\n";
        String added = "  - name: added\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n";
        Path config = Files.writeString(dir.resolve("sluice.yaml"), kept);
        Process process = new ProcessBuilder(List.of(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--config", config.toString())).redirectErrorStream(true).start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)).lines().forEach(lines::add));
        reader.setDaemon(true);
        reader.start();
        try {
            String listening = lines.poll(60, TimeUnit.SECONDS);
            Matcher where = Pattern.compile("sluice: serving 1 policy from .* on http://localhost:(\\d+) \\(store: memory\\)")
                    .matcher(String.valueOf(listening));
            assertThat(where.matches()).as(listening).isTrue();
            String base = "http://localhost:" + where.group(1);
            HttpClient client = HttpClient.newHttpClient();
            String check = "{\"policy\":\"kept\",\"key\":\"10.0.0.7\"}";
            assertThat(post(client, base, check)).contains("\"remaining\":2");

            replace(config, kept + added);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            String policies;
            do {
                Thread.sleep(100);
                policies = client.send(HttpRequest.newBuilder(URI.create(base + "/v1/policies")).build(),
                        HttpResponse.BodyHandlers.ofString()).body();
            } while (!policies.contains("\"name\":\"added\"") && System.nanoTime() < deadline);
            assertThat(policies).contains("\"name\":\"added\"");
            assertThat(post(client, base, check)).as("an unchanged policy keeps its count").contains("\"remaining\":1");

            replace(config, kept.replace("[3/1h]", "[3/1y]") + added);
            String expected = config + ":5: policies[0].limits[0]: bad limit \"3/1y\": ";
            String reported = null;
            long reportedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < reportedBy) {
                String line = lines.poll(1, TimeUnit.SECONDS);
                if (line != null && line.contains(expected)) {
                    reported = line;
                    break;
                }
            }
            assertThat(reported).as("the bad edit reported with file, line and field").isNotNull()
                    .endsWith("(the last good configuration stays in force)");
            // on one line, its time with the zone and its level: a log shipper takes a line for a record
            assertThat(reported).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}[+-]\\d{4} SEVERE"
                    + " sluice: " + java.util.regex.Pattern.quote(expected) + ".*");
            assertThat(post(client, base, check)).as("the last good configuration decides").contains("\"remaining\":0");
            String metrics = client.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            assertThat(metrics).contains("sluice_config_reloads_total{result=\"success\"} 1.0")
                    .contains("sluice_config_reloads_total{result=\"failure\"} 1.0");
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    /** Replaces the file whole at once, as an editor saves it: the server, reading every second, never sees half. */
    private static void replace(Path file, String text) throws Exception {
        Path next = Files.writeString(file.resolveSibling(file.getFileName() + ".next"), text);
        Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    private static String post(HttpClient client, String base, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + "/v1/check"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    /** {@code --idle-timeout} sets how long a connection that carries no request is kept (60 s unless told). */
    @Test
    void closesAConnectionThatCarriesNoRequestAfterTheIdleTimeoutGiven() throws Exception {
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--idle-timeout", "1s").directory(dir.toFile()).redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            Matcher where = Pattern.compile(".* on http://localhost:(\\d+) .*").matcher(out.readLine());
            assertThat(where.matches()).isTrue();
            IdleConnection.assertClosedAfterAnIdleSecond("localhost", Integer.parseInt(where.group(1)));
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Test
    void refusesABadGrpcPort() throws Exception {
        Process process = new ProcessBuilder(List.of(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0",
                "--grpc-port", "70000")).directory(dir.toFile()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).isEqualTo(2);
        assertThat(output).isEqualTo("error: --grpc-port: expected 0 to 65535, got 70000\n");
    }

    /** A past bug: {@code abc}, {@code 0} and {@code -1} were ignored, and {@code 100000} failed as too many open files. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"abc", "0", "-1", "100000", "", "+4"})
    void refusesABadNumberOfEventLoopsNamingIt(String loops) throws Exception {
        ProcessBuilder builder = new ProcessBuilder(List.of(ROOT.resolve("bin/sluice").toString(), "serve", "--port", "0"))
                .directory(dir.toFile()).redirectErrorStream(true);
        builder.environment().put("SLUICE_JAVA_OPTS", "-Dsluice.event-loops=" + loops);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).isEqualTo(2);
        assertThat(output).isEqualTo("error: -Dsluice.event-loops: expected a whole number of event loops from 1 to 1024,"
                + " got '" + loops + "'\n");
    }
}
