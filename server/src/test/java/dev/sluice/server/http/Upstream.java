package dev.sluice.server.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;

import javax.net.ssl.SSLContext;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A real upstream API for the gateway's tests, on the JDK's own HTTP server (another implementation than the
 * gateway's): it counts and records what reaches it. {@code /upload} answers the SHA-256 and length of the body
 * it received, {@code /download?bytes=N} sends N bytes of a known pattern, anything else answers 200 {@code hello}.
 * Two paths show whether bodies are streamed: {@code /drip} sends {@code first}, then waits for
 * {@link #dripRest} before it sends {@code rest}; {@code /trickle} counts {@link #trickleBegun} down once the first
 * bytes of a body have reached it, and answers the body's length at its end.
 */
final class Upstream implements AutoCloseable {
    private final HttpServer server;
    final AtomicInteger requests = new AtomicInteger();
    final List<Map<String, String>> seen = new CopyOnWriteArrayList<>();
    final CountDownLatch dripRest = new CountDownLatch(1);
    final CountDownLatch trickleBegun = new CountDownLatch(1);

    private final String scheme;

    Upstream() throws IOException {
        this(HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0), "http");
    }

    /** An upstream answering over TLS with {@code tls}'s certificate. */
    Upstream(SSLContext tls) throws IOException {
        this(httpsServer(tls), "https");
    }

    private Upstream(HttpServer server, String scheme) {
        this.server = server;
        this.scheme = scheme;
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.createContext("/", this::answer);
        server.start();
    }

    private static HttpServer httpsServer(SSLContext tls) throws IOException {
        HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setHttpsConfigurator(new HttpsConfigurator(tls));
        return server;
    }

    int port() {
        return server.getAddress().getPort();
    }

    String uri() {
        return scheme + "://127.0.0.1:" + port();
    }

    static byte pattern(long i) {
        return (byte) (i * 31 + (i >> 8));
    }

    private void answer(HttpExchange exchange) throws IOException {
        try {
            respond(exchange);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void respond(HttpExchange exchange) throws IOException, InterruptedException {
        requests.incrementAndGet();
        Map<String, String> request = new ConcurrentHashMap<>();
        request.put(":path", exchange.getRequestURI().toString());
        exchange.getRequestHeaders().forEach((name, values) -> request.put(name.toLowerCase(), String.join(",", values)));
        seen.add(request);
        try (exchange) {
            String path = exchange.getRequestURI().getPath();
            if (path.equals("/upload")) {
                MessageDigest sha = sha256();
                long length = 0;
                byte[] buffer = new byte[65536];
                try (InputStream in = exchange.getRequestBody()) {
                    for (int n; (n = in.read(buffer)) > 0; ) {
                        sha.update(buffer, 0, n);
                        length += n;
                    }
                }
                send(exchange, 200, (HexFormat.of().formatHex(sha.digest()) + " " + length).getBytes());
            } else if (path.endsWith("/limited")) { // a limiter of the upstream's own: 429, 3 left of its 5
                exchange.getResponseHeaders().add("RateLimit-Policy", "\"up\";q=5;w=60");
                exchange.getResponseHeaders().add("RateLimit", "\"up\";r=0;t=7");
                exchange.getResponseHeaders().add("X-RateLimit-Limit", "5");
                exchange.getResponseHeaders().add("X-RateLimit-Remaining", "0");
                exchange.getResponseHeaders().add("X-RateLimit-Reset", "7");
                send(exchange, 429, "limited upstream".getBytes());
            } else if (path.equals("/download")) {
                long bytes = Long.parseLong(exchange.getRequestURI().getQuery().substring("bytes=".length()));
                exchange.sendResponseHeaders(200, bytes);
                try (OutputStream out = exchange.getResponseBody()) {
                    byte[] chunk = new byte[65536];
                    for (long sent = 0; sent < bytes; ) {
                        int n = (int) Math.min(chunk.length, bytes - sent);
                        for (int i = 0; i < n; i++) {
                            chunk[i] = pattern(sent + i);
                        }
                        out.write(chunk, 0, n);
                        sent += n;
                    }
                }
            } else if (path.equals("/drip")) {
                exchange.sendResponseHeaders(200, 0); // chunked
                OutputStream out = exchange.getResponseBody();
                out.write("first".getBytes());
                out.flush();
                if (dripRest.await(30, TimeUnit.SECONDS)) {
                    out.write("rest".getBytes());
                }
                out.close();
            } else if (path.equals("/trickle")) {
                long length = 0;
                byte[] buffer = new byte[65536];
                try (InputStream in = exchange.getRequestBody()) {
                    for (int n; (n = in.read(buffer)) > 0; ) {
                        length += n;
                        trickleBegun.countDown();
                    }
                }
                send(exchange, 200, Long.toString(length).getBytes());
            } else if (path.equals("/broken")) {
                exchange.sendResponseHeaders(200, 1_000_000); // promises a million bytes, sends ten, hangs up
                exchange.getResponseBody().write("0123456789".getBytes());
                exchange.getResponseBody().flush();
                Thread.sleep(100);
                throw new IOException("the upstream breaks off");
            } else if (path.equals("/hold")) {
                Thread.sleep(Long.parseLong(exchange.getRequestURI().getQuery().substring("ms=".length())));
                send(exchange, 200, "held".getBytes());
            } else if (path.equals("/hop")) {
                // hop-by-hop headers of its own: the standard ones, and one its Connection header names
                exchange.getResponseHeaders().add("Connection", "X-Up-Hop");
                exchange.getResponseHeaders().add("X-Up-Hop", "1");
                exchange.getResponseHeaders().add("Proxy-Authenticate", "Basic realm=\"up\"");
                exchange.getResponseHeaders().add("Keep-Alive", "timeout=5");
                exchange.getResponseHeaders().add("X-Upstream-Kept", "yes");
                send(exchange, 200, "hop".getBytes());
            } else if (path.equals("/empty")) {
                exchange.getResponseHeaders().add("X-Upstream", "yes");
                exchange.sendResponseHeaders(204, -1);
            } else {
                exchange.getRequestBody().readAllBytes();
                exchange.getResponseHeaders().add("X-Upstream", "yes");
                send(exchange, 200, "hello".getBytes());
            }
        }
    }

    private static void send(HttpExchange exchange, int status, byte[] body) throws IOException {
        exchange.sendResponseHeaders(status, body.length);
        exchange.getResponseBody().write(body);
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
