package dev.sluice.server.http;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.PoolOptions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Every event loop answers requests. A past bug: the API and the gateway each started one Vert.x server, which
 * runs on one event loop however many there are, so under load one loop was busy and the others idle.
 */
class EventLoopsTest {
    private final Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(2));

    @AfterEach
    void close() throws Exception {
        vertx.close().toCompletionStage().toCompletableFuture().get();
    }

    @Test
    void connectionsAreSharedOutAmongTheLoops() throws Exception {
        int port = EventLoops.listen(vertx, 2, "127.0.0.1", 0, () -> vertx.createHttpServer()
                .requestHandler(request -> request.response().end(Thread.currentThread().getName()))).actualPort();

        Set<String> answeredBy = new HashSet<>();
        for (int connection = 0; connection < 4; connection++) {
            answeredBy.add(bodyOfOneRequest(port));
        }

        assertThat(answeredBy).hasSize(2).allSatisfy(thread -> assertThat(thread).startsWith("vert.x-eventloop-thread-"));
    }

    /**
     * A bug found by {@code pidstat -t} under wrk: the gateway's servers, which each make an HTTP client to the
     * upstream as they start, all ran on one loop of two. Each deployment took the next loop in turn, and the
     * client made in between took one too, so with two loops both servers got the first.
     */
    @Test
    void serversThatMakeAClientAsTheyStartAreSharedOutToo() throws Exception {
        int port = EventLoops.listen(vertx, 2, "127.0.0.1", 0, () -> {
            vertx.createHttpClient(new HttpClientOptions(), new PoolOptions()); // as the gateway's do
            return vertx.createHttpServer()
                    .requestHandler(request -> request.response().end(Thread.currentThread().getName()));
        }).actualPort();

        Set<String> answeredBy = new HashSet<>();
        for (int connection = 0; connection < 4; connection++) {
            answeredBy.add(bodyOfOneRequest(port));
        }

        assertThat(answeredBy).hasSize(2);
    }

    @Test
    void aPortInUseIsTheFailureOfTheStart() throws Exception {
        int taken = EventLoops.listen(vertx, 1, "127.0.0.1", 0, () -> vertx.createHttpServer()
                .requestHandler(request -> request.response().end())).actualPort();
        Vertx other = Vertx.vertx();
        try {
            assertThatThrownBy(() -> EventLoops.listen(other, 2, "127.0.0.1", taken,
                    () -> other.createHttpServer().requestHandler(request -> request.response().end())))
                    .hasStackTraceContaining("Address already in use");
        } finally {
            other.close().toCompletionStage().toCompletableFuture().get();
        }
    }

    /** One request on a connection of its own: the answer's body. */
    private static String bodyOfOneRequest(int port) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            OutputStream out = socket.getOutputStream();
            out.write("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            String answer = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
            assertThat(answer).startsWith("HTTP/1.1 200");
            return answer.substring(answer.indexOf("\r\n\r\n") + 4);
        }
    }
}
