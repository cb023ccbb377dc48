package dev.sluice.server.http;

import org.junit.jupiter.api.Test;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Clients that are slow or idle: an upload that stops, a reader slower than the upstream, a connection that carries no
 * request, a client that stops reading.
 */
class GatewayClientsTest extends GatewayFixture {
    /** A client whose body stops coming gets a 408 once the upstream timeout has passed, and its connection closed. */
    @Test
    void anUploadThatStopsGets408() throws Exception {
        reopen(upstream.uri(), 1_000);
        long started = System.nanoTime();
        String answer;
        try (java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port())) {
            client.setSoTimeout(10_000);
            client.getOutputStream().write("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf."
                    .getBytes(StandardCharsets.US_ASCII));
            answer = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
        assertThat(answer).startsWith("HTTP/1.1 408 Request Timeout\r\n")
                .endsWith("{\"error\":\"request timeout: the request's body stopped coming\"}");
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isBetween(Duration.ofMillis(900), Duration.ofSeconds(5));
    }

    /**
     * A past bug a review found: a client a little slower than the upstream, reading all along, was cut off one timeout
     * after it first fell behind (each part of a read that came in after the queue filled set a timer of its own, and
     * only the last was cancelled as the client caught up).
     */
    @Test
    void aClientReadingSlowerThanTheUpstreamSendsGetsTheWholeAnswer() throws Exception {
        reopen(upstream.uri(), 1_000);
        long bytes = 48L * 1024 * 1024;
        long read = 0;
        long started = System.nanoTime();
        try (java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port())) {
            client.setSoTimeout(20_000);
            client.setReceiveBufferSize(64 * 1024);
            client.getOutputStream().write(("GET /download?bytes=" + bytes + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            InputStream in = client.getInputStream();
            byte[] buffer = new byte[64 * 1024];
            try {
                for (int n; (n = in.read(buffer)) > 0; ) {
                    read += n;
                    Thread.sleep(4); // about 16 MB a second at most: slower than the upstream sends
                }
            } catch (java.net.SocketException reset) {
                // cut off
            }
        }
        assertThat(read).as("the whole answer, its head included").isGreaterThan(bytes);
        assertThat(Duration.ofNanos(System.nanoTime() - started)).as("longer than the timeout").isGreaterThan(Duration.ofSeconds(2));
    }

    /**
     * A client's connection that carries no request is closed after the idle timeout, as nginx's
     * {@code client_header_timeout} and {@code keepalive_timeout} close theirs: one whose head never ends, and one
     * kept alive after its answer. Before, both were held for good. A request being handled is never cut, however
     * long it waits (on a slow upstream, or held for its turn), and a connection used again within the timeout
     * stays open.
     */
    @Test
    void aConnectionThatCarriesNoRequestIsClosedAndOneBeingHandledNever() throws Exception {
        long idleMs = 1_000;
        reopen(upstream.uri(), Gateway.DEFAULT_UPSTREAM_TIMEOUT_MS, idleMs);
        long started = System.nanoTime(); // before the connection is made: the gateway's clock for it starts after
        try (java.net.Socket client = rawClient()) {
            client.getOutputStream().write("GET /elsewhere HTTP/1.1\r\nHost: x\r\nX-Us".getBytes(StandardCharsets.US_ASCII));
            assertThat(client.getInputStream().read()).as("closed, nothing answered").isEqualTo(-1);
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isBetween(Duration.ofMillis(idleMs), Duration.ofSeconds(5));
        }
        try (java.net.Socket client = rawClient()) {
            var in = new java.io.BufferedReader(new java.io.InputStreamReader(client.getInputStream(), StandardCharsets.ISO_8859_1));
            long lastSent = 0;
            for (int i = 0; i < 4; i++) { // 4 answers 300 ms apart: the connection outlives the timeout in use
                lastSent = System.nanoTime(); // before the request: its answer, when the idle time starts, is after
                client.getOutputStream().write("GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                assertThat(readAnswer(in)).startsWith("HTTP/1.1 200 OK\r\n").endsWith("\r\nhello");
                Thread.sleep(300);
            }
            assertThat(in.read()).as("closed once left idle").isEqualTo(-1);
            assertThat(Duration.ofNanos(System.nanoTime() - lastSent)).isBetween(Duration.ofMillis(idleMs), Duration.ofSeconds(5));
        }
        assertThat(send(request("/slow/a").header("X-User", "erin")).statusCode()).isEqualTo(200);
        assertThat(send(request("/slow/a").header("X-User", "erin")).statusCode()).isEqualTo(200);
        try (java.net.Socket slow = rawClient(); java.net.Socket held = rawClient()) {
            // an upstream silent for 2.5 s, and a turn 2 s away (2/4s, both taken): each longer than the timeout
            slow.getOutputStream().write("GET /hold?ms=2500 HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            held.getOutputStream().write("GET /slow/a HTTP/1.1\r\nHost: x\r\nX-User: erin\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            assertThat(readAnswer(new java.io.BufferedReader(new java.io.InputStreamReader(slow.getInputStream(),
                    StandardCharsets.ISO_8859_1)))).startsWith("HTTP/1.1 200 OK\r\n").endsWith("\r\nheld");
            assertThat(readAnswer(new java.io.BufferedReader(new java.io.InputStreamReader(held.getInputStream(),
                    StandardCharsets.ISO_8859_1)))).startsWith("HTTP/1.1 200 OK\r\n").endsWith("\r\nhello");
        }
        assertThat(live.metrics().scrape()).contains("sluice_decisions_total{outcome=\"delayed\",policy=\"valve\"} 1.0");
    }

    /**
     * A client that stops reading a long answer is let go once the upstream timeout has passed, as nginx's
     * {@code send_timeout}: it does not hold the upstream's connection for good, and the gateway goes on.
     */
    @Test
    void aClientThatStopsReadingIsLetGo() throws Exception {
        reopen(upstream.uri(), 1_000);
        long bytes = 256L * 1024 * 1024;
        long read = 0;
        try (java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port())) {
            client.setSoTimeout(20_000);
            client.getOutputStream().write(("GET /download?bytes=" + bytes + " HTTP/1.1\r\nHost: x\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            Thread.sleep(4_000); // reading nothing
            // cut, not closed after what waits to be written, which a client reading nothing never lets go
            assertThat(established(gateway.port())).as("the gateway's connections still open").isZero();
            byte[] buffer = new byte[65536];
            try {
                for (int n; (n = client.getInputStream().read(buffer)) > 0; ) {
                    read += n;
                }
            } catch (java.net.SocketException reset) {
                // closed on it
            }
        }
        assertThat(read).as("cut off, not sent whole").isLessThan(bytes);
        assertThat(send(request("/elsewhere")).body()).isEqualTo("hello");
    }
}
