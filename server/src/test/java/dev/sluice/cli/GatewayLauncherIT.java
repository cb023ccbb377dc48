package dev.sluice.cli;

import com.sun.net.httpserver.HttpServer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code bin/sluice gateway} as a user runs it, in front of a real upstream, with its admin port. */
class GatewayLauncherIT {
    private static final Path ROOT = Path.of(System.getProperty("user.dir")).getParent();
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    @TempDir
    Path dir;

    private static HttpResponse<String> get(int port, String path) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void limitsRequestsOnTheirWayToTheUpstream() throws Exception {
        AtomicInteger reached = new AtomicInteger();
        HttpServer upstream = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        upstream.createContext("/", exchange -> {
            reached.incrementAndGet();
            byte[] body = "upstream".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        upstream.start();
        Path config = Files.writeString(dir.resolve("sluice.yaml"), """
                policies:
                  - name: per-ip
                    key: [ip]
                    algorithm: fixed-window
                    limits: [2/1h]
                """);
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway", "--upstream",
                "http://127.0.0.1:" + upstream.getAddress().getPort(), "--config", config.toString(), "--port", "0",
                "--host", "127.0.0.1", "--admin-port", "0").redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String first = out.readLine();
            Matcher gateway = Pattern.compile("sluice: gateway on http://127.0.0.1:(\\d+) to http://127.0.0.1:\\d+, 1 policy from .*sluice.yaml \\(store: memory\\)")
                    .matcher(first);
            assertThat(gateway.matches()).as(first).isTrue();
            String second = out.readLine();
            Matcher admin = Pattern.compile(" +API, dashboard and metrics on http://127.0.0.1:(\\d+)/").matcher(second);
            assertThat(admin.matches()).as(second).isTrue();
            int port = Integer.parseInt(gateway.group(1));
            assertThat(get(port, "/a").body()).isEqualTo("upstream");
            assertThat(get(port, "/b").statusCode()).isEqualTo(200);
            HttpResponse<String> rejected = get(port, "/c");
            assertThat(rejected.statusCode()).isEqualTo(429);
            assertThat(rejected.body()).startsWith("{\"error\":\"rate limited\",\"policy\":\"per-ip\",\"retry_after_ms\":");
            assertThat(reached.get()).isEqualTo(2);
            assertThat(get(Integer.parseInt(admin.group(1)), "/metrics").body())
                    .contains("sluice_decisions_total{outcome=\"rejected\",policy=\"per-ip\"} 1.0");
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
            upstream.stop(0);
        }
    }

    /**
     * Asked to stop ({@code SIGTERM}), the gateway lets the request with the upstream finish and answers it before the
     * process ends. A past bug: it was cut with no answer, though the upstream did its work.
     */
    @Test
    void aStoppedGatewayAnswersTheRequestUnderWayFirst() throws Exception {
        java.util.concurrent.CountDownLatch reached = new java.util.concurrent.CountDownLatch(1);
        HttpServer upstream = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        upstream.setExecutor(java.util.concurrent.Executors.newFixedThreadPool(2));
        upstream.createContext("/", exchange -> {
            reached.countDown();
            try {
                Thread.sleep(1_500);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            byte[] body = "done".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        upstream.start();
        Path config = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [10/1s]\n");
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway", "--upstream",
                "http://127.0.0.1:" + upstream.getAddress().getPort(), "--config", config.toString(), "--port", "0",
                "--host", "127.0.0.1", "--drain-timeout", "60s").redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            Matcher gateway = Pattern.compile("sluice: gateway on http://127.0.0.1:(\\d+) .*").matcher(out.readLine());
            assertThat(gateway.matches()).isTrue();
            var answer = CLIENT.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.group(1)
                    + "/work")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(reached.await(10, TimeUnit.SECONDS)).isTrue();
            process.destroy(); // SIGTERM
            HttpResponse<String> finished = answer.get(10, TimeUnit.SECONDS);
            assertThat(finished.statusCode()).isEqualTo(200);
            assertThat(finished.body()).isEqualTo("done");
            // long before the 60 s the drain may take
            assertThat(process.waitFor(5, TimeUnit.SECONDS)).as("ends once the request is over").isTrue();
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
            upstream.stop(0);
        }
    }

    /** {@code --idle-timeout} holds for the gateway's clients and for its admin port alike. */
    @Test
    void closesConnectionsThatCarryNoRequestAfterTheIdleTimeoutGiven() throws Exception {
        Path config = Files.writeString(dir.resolve("sluice.yaml"),
                "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n");
        Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway", "--upstream",
                "http://127.0.0.1:1", "--config", config.toString(), "--port", "0", "--host", "127.0.0.1",
                "--admin-port", "0", "--idle-timeout", "1s").redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            Matcher gateway = Pattern.compile("sluice: gateway on http://127.0.0.1:(\\d+) .*").matcher(out.readLine());
            Matcher admin = Pattern.compile(" +API, dashboard and metrics on http://127.0.0.1:(\\d+)/").matcher(out.readLine());
            assertThat(gateway.matches() && admin.matches()).isTrue();
            for (Matcher port : List.of(gateway, admin)) {
                IdleConnection.assertClosedAfterAnIdleSecond("127.0.0.1", Integer.parseInt(port.group(1)));
            }
        } finally {
            process.destroy();
            assertThat(process.waitFor(20, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Test
    void refusesABadUpstream() throws Exception {
        for (List<String> arguments : List.of(List.of("--upstream", "localhost:80"), List.of("--upstream", "http://h:1/api"),
                List.of("--upstream", "http://h:99999"), List.of("--upstream", "http://h:80/?a=1"),
                List.of("--upstream", "http://127.0.0.1:0"))) {
            Process process = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway", arguments.get(0),
                    arguments.get(1), "--port", "0").redirectErrorStream(true).start();
            String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(process.exitValue()).isEqualTo(2);
            assertThat(output).isEqualTo("error: --upstream: expected http://host:port or https://host:port (no path, query or user), got \"" + arguments.get(1) + "\"\n");
        }
        Process timeout = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway", "--upstream", "http://h:1",
                "--upstream-timeout", "soon").redirectErrorStream(true).start();
        String said = new String(timeout.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(timeout.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(timeout.exitValue()).isEqualTo(2);
        assertThat(said).isEqualTo("error: --upstream-timeout: bad duration \"soon\": expected a whole number and a unit"
                + " (ns, us, ms, s, m, h, d) such as 10s\n");
        Process missing = new ProcessBuilder(ROOT.resolve("bin/sluice").toString(), "gateway").redirectErrorStream(true).start();
        String output = new String(missing.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(missing.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(missing.exitValue()).isEqualTo(2);
        assertThat(output).isEqualTo("error: Missing required option: '--upstream=URL'\n");
    }
}
