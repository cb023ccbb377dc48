package dev.sluice.server.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What every test of the gateway starts with: a real upstream, and the gateway in front of it on a port of its own,
 * deciding by {@link #POLICIES}; and the clients that speak to it, Java's own and raw sockets for what Java's would
 * not send.
 */
abstract class GatewayFixture {
    static final ObjectMapper JSON = new ObjectMapper();

    static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    static final String POLICIES = """
            headers: [ietf, legacy]
            policies:
              - name: per-user
                match:
                  path: /api/**
                key: [header:X-User]
                algorithm: fixed-window
                limits: [2/1h]
              - name: valve
                match:
                  path: /slow/*
                key: [header:X-User]
                algorithm: gcra
                limits: [2/4s]
                mode: delay
                max_delay: 5s
              - name: per-ip
                match:
                  path: /ip
                key: [ip]
                algorithm: fixed-window
                limits: [1/1h]
              - name: watch
                match:
                  path: /shadow
                key: [const:all]
                algorithm: fixed-window
                limits: [1/1h]
                mode: shadow
              - name: in-flight
                match:
                  path: /hold
                key: [const:all]
                algorithm: concurrency
                limits: [2/30s]
              - name: by-query
                match:
                  path: /q
                key: [query:user]
                algorithm: fixed-window
                limits: [1/1h]
              - name: slots-by-header
                match:
                  path: /hold-by-user
                key: [header:X-User]
                algorithm: concurrency
                limits: [1/1h]
              - name: weighted
                match:
                  path: /search
                key: [header:X-User]
                algorithm: token-bucket
                refill: interval
                limits: [10/1h]
                cost: header:X-Cost
            """;

    Upstream upstream;

    LiveConfig live;

    Gateway gateway;

    @BeforeEach
    void start() throws Exception {
        upstream = new Upstream();
        open("trusted_proxies: [127.0.0.1/32]\n", upstream.uri());
    }

    void open(String proxies, String to) throws Exception {
        live = LiveConfig.of(ConfigLoader.parse("gateway.yaml", proxies + POLICIES), new ServerMetrics());
        gateway = Gateway.start(live, URI.create(to), "127.0.0.1", 0);
    }

    /** The gateway of this test started again, in front of {@code to}, the upstream allowed {@code timeoutMs} of silence. */
    void reopen(String to, long timeoutMs) throws Exception {
        reopen(to, timeoutMs, Gateway.IDLE_CLIENT_TIMEOUT_MS);
    }

    /** As {@link #reopen(String, long)}, a client's connection that carries no request closed after {@code idleMs}. */
    void reopen(String to, long timeoutMs, long idleMs) throws Exception {
        gateway.close();
        live.close();
        live = LiveConfig.of(ConfigLoader.parse("gateway.yaml", POLICIES), new ServerMetrics());
        gateway = Gateway.start(live, URI.create(to), "127.0.0.1", 0, timeoutMs, null, idleMs);
    }

    @AfterEach
    void stop() throws Exception {
        gateway.close();
        live.close();
        upstream.close();
    }

    HttpRequest.Builder request(String path) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + path)).timeout(Duration.ofSeconds(30));
    }

    static HttpResponse<String> send(HttpRequest.Builder request) throws Exception {
        return CLIENT.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }

    static String header(HttpResponse<?> response, String name) {
        return response.headers().firstValue(name).orElse(null);
    }

    /** Asserts that {@code answer}, read by {@link #raw}, is a 400 whose JSON body's error is {@code error}. */
    static void assertRefused(String answer, String error) throws IOException {
        assertThat(answer).startsWith("HTTP/1.1 400 ");
        assertThat(JSON.readTree(answer.substring(answer.indexOf("\r\n\r\n") + 4)).get("error").asText())
                .isEqualTo(error);
    }

    /** Sends {@code head} (request line and headers, CRLF-separated, without the blank line) as written, and reads the answer. */
    String raw(String head) throws Exception {
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", gateway.port())) {
            socket.setSoTimeout(10_000);
            socket.getOutputStream().write((head + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
            return new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** Reads what comes on {@code client} until it closes, on another thread. */
    static CompletableFuture<String> readAllAsync(java.net.Socket client) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(client.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    /** One answer read off a connection: its head and its body of Content-Length bytes. */
    static String readAnswer(java.io.BufferedReader in) throws IOException {
        StringBuilder answer = new StringBuilder();
        int length = Math.max(0, RawUpstream.readHead(in, answer));
        char[] body = new char[length];
        for (int read = 0; read < length; ) {
            int n = in.read(body, read, length - read);
            if (n < 0) {
                break;
            }
            read += n;
        }
        return answer.append("\r\n").append(body).toString();
    }

    /**
     * The gateway's connections on {@code port} that are open on its side: Linux's socket table (/proc/net/tcp and
     * tcp6), rows whose local port is {@code port} in state 01, ESTABLISHED. A connection the gateway has closed
     * is FIN_WAIT1 or later, whatever the client does.
     */
    static long established(int port) throws IOException {
        String local = String.format(":%04X", port);
        long open = 0;
        for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
            for (String row : java.nio.file.Files.readAllLines(java.nio.file.Path.of(table))) {
                String[] fields = row.trim().split("\\s+"); // sl local_address rem_address st ...
                if (fields[1].endsWith(local) && fields[3].equals("01")) {
                    open++;
                }
            }
        }
        return open;
    }

    java.net.Socket rawClient() throws IOException {
        java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port());
        client.setSoTimeout(10_000);
        return client;
    }
}
