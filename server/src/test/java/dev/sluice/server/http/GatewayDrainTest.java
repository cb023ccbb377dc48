package dev.sluice.server.http;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The gateway stopped as the process is asked to ({@code SIGTERM}: {@link Gateway#startDraining}), in front of a real
 * upstream. A past bug: every request held for its turn or waiting on the upstream was dropped with no answer, though
 * charged, and the upstream did the work of one.
 */
class GatewayDrainTest {
    private static final HttpClient CLIENT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();
    private static final String POLICIES = """
            policies:
              - name: valve
                match:
                  path: /slow/*
                key: [header:X-User]
                algorithm: gcra
                limits: [1/2s]
                mode: delay
                max_delay: 10s
            """;

    private Upstream upstream;
    private LiveConfig live;
    private Gateway gateway;

    @BeforeEach
    void start() throws Exception {
        upstream = new Upstream();
        live = LiveConfig.of(ConfigLoader.parse("gateway.yaml", POLICIES), new ServerMetrics());
        gateway = Gateway.start(live, URI.create(upstream.uri()), "127.0.0.1", 0);
    }

    @AfterEach
    void stop() throws Exception {
        gateway.close();
        live.close();
        upstream.close();
    }

    @Test
    void aStopLetsTheRequestsUnderWayFinishAndTakesNoNewConnection() throws Exception {
        long started = System.nanoTime();
        CompletableFuture<HttpResponse<String>> withUpstream = send("/hold?ms=1500", "amy");
        assertThat(send("/slow/a", "amy").get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        CompletableFuture<HttpResponse<String>> held = send("/slow/a", "amy"); // its turn 2 s after the first
        awaitHeldAndForwarded(1, 2);

        CompletableFuture<Boolean> drained = drain(Duration.ofSeconds(8));
        try (java.net.Socket late = new java.net.Socket("127.0.0.1", gateway.port())) {
            late.setSoTimeout(5_000);
            late.getOutputStream().write("GET /x HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(
                    java.nio.charset.StandardCharsets.US_ASCII));
            assertThat(readAll(late)).as("a connection accepted while draining is closed unanswered").isEmpty();
        }

        HttpResponse<String> upstreamAnswer = withUpstream.get(10, TimeUnit.SECONDS);
        assertThat(upstreamAnswer.statusCode()).isEqualTo(200);
        HttpResponse<String> heldAnswer = held.get(10, TimeUnit.SECONDS);
        assertThat(heldAnswer.statusCode()).as("held, then forwarded at its turn").isEqualTo(200);
        assertThat(heldAnswer.body()).isEqualTo("hello");
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isGreaterThanOrEqualTo(Duration.ofMillis(1900));
        assertThat(drained.get(10, TimeUnit.SECONDS)).isTrue();
        assertThat(Duration.ofNanos(System.nanoTime() - started)).as("over once its requests are, not at the deadline")
                .isLessThan(Duration.ofSeconds(7));
        assertThat(upstream.requests.get()).isEqualTo(3);
        assertThat(live.metrics().scrape()).contains("sluice_gateway_failures_total{what=\"stopped_while_held\"} 0.0");
    }

    @Test
    void aRequestStillHeldWhenTheTimeIsUpIsAnswered503AndNeverForwarded() throws Exception {
        assertThat(send("/slow/b", "ben").get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        CompletableFuture<HttpResponse<String>> held = send("/slow/b", "ben");
        awaitHeldAndForwarded(1, 1);

        long before = System.nanoTime();
        assertThat(drain(Duration.ofMillis(300)).get(10, TimeUnit.SECONDS)).isTrue();
        HttpResponse<String> answer = held.get(5, TimeUnit.SECONDS);
        assertThat(Duration.ofNanos(System.nanoTime() - before)).isLessThan(Duration.ofMillis(1500));
        assertThat(answer.statusCode()).isEqualTo(503);
        assertThat(answer.body()).isEqualTo("{\"error\":\"the gateway is stopping\"}");
        assertThat(answer.headers().firstValue("Connection")).hasValue("close");
        Thread.sleep(2_200); // past its turn
        assertThat(upstream.requests.get()).as("never forwarded").isEqualTo(1);
        assertThat(live.metrics().scrape()).contains("sluice_gateway_failures_total{what=\"stopped_while_held\"} 1.0")
                .doesNotContain("left_while_held\"} 1.0");
    }

    private CompletableFuture<HttpResponse<String>> send(String path, String user) {
        return CLIENT.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + path))
                .header("X-User", user).timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /**
     * Drains the gateway, {@code time} given: whether every connection closed within it (or the second after). Starts
     * draining on the caller's thread, so that a connection the test makes next is surely made while draining (begun
     * on another thread, a test's sleep of 200 ms stood for it); waits for the drain on another.
     */
    private CompletableFuture<Boolean> drain(Duration time) {
        gateway.startDraining();
        long deadline = System.nanoTime() + time.toNanos();
        return CompletableFuture.supplyAsync(() -> awaitDrained(deadline));
    }

    private boolean awaitDrained(long deadline) {
        try {
            gateway.awaitDrained(deadline);
            return gateway.draining().open() == 0;
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Waits until {@code delayed} requests are held and the upstream has seen {@code forwarded}. */
    private void awaitHeldAndForwarded(int delayed, int forwarded) throws InterruptedException {
        long giveUp = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (!(live.metrics().scrape().contains("sluice_decisions_total{outcome=\"delayed\",policy=\"valve\"} "
                + delayed + ".0") && upstream.requests.get() >= forwarded)) {
            assertThat(System.nanoTime()).as("held and forwarded within 5 s").isLessThan(giveUp);
            Thread.sleep(5);
        }
    }

    private static String readAll(java.net.Socket socket) throws java.io.IOException {
        try {
            return new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.ISO_8859_1);
        } catch (java.net.SocketException reset) {
            return "";
        }
    }
}
