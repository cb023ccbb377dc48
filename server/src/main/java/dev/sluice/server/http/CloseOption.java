package dev.sluice.server.http;

import io.vertx.core.Handler;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The {@code close} connection option honoured when a client sends it among others ({@code Connection: TE,
 * close}, as some clients do): RFC 9112 §9.6 has the server close the connection after its answer, and handle
 * no request that follows on it. Vert.x compares the whole {@code Connection} value with {@code close}, so such
 * a connection stayed open (a bug pinned in GatewayRequestReadingTest and CheckApiTest). For those requests the answer says
 * {@code Connection: close}; the connection is closed once the answer is written and the request read whole,
 * what is left of its body read and dropped (closing on a body still arriving would have the client's kernel
 * reset the connection, and the client could lose the answer); a request pipelined behind it is not handled. A lone {@code close} is Vert.x's own.
 */
final class CloseOption {
    /** Connections closing: what they still carry is not handled. Each leaves once it is closed. */
    private static final Set<HttpConnection> CLOSING = ConcurrentHashMap.newKeySet();

    private CloseOption() {
    }

    /** {@code handler}, with the close option honoured first. */
    static Handler<HttpServerRequest> honoured(Handler<HttpServerRequest> handler) {
        return request -> {
            HttpConnection connection = request.connection();
            if (CLOSING.contains(connection)) {
                return; // after a request that asked to close: never answered, the connection closes
            }
            if (asked(request)) {
                CLOSING.add(connection);
                connection.closeHandler(closed -> CLOSING.remove(connection));
                // just before the head is written, so whatever the handler did to the headers, it says so
                request.response().headersEndHandler(head -> request.response().putHeader(HttpHeaders.CONNECTION,
                        HttpHeaders.CLOSE));
                request.response().bodyEndHandler(answered -> {
                    Forwarder.dropRest(request); // a body nobody reads now (a gateway's request waits paused)
                    request.end().onComplete(read -> connection.close());
                });
            }
            handler.handle(request);
        };
    }

    /** Whether an HTTP/1.1 request names {@code close} among several connection options, on any of its lines. */
    private static boolean asked(HttpServerRequest request) {
        if (request.version() != HttpVersion.HTTP_1_1 || request.getHeader(HttpHeaders.CONNECTION) == null) {
            return false; // the common case, answered without making a list
        }
        var lines = request.headers().getAll(HttpHeaders.CONNECTION);
        if (lines.size() == 1 && lines.get(0).indexOf(',') < 0) {
            return false; // one option alone: Vert.x's
        }
        for (String line : lines) {
            for (String option : line.split(",")) {
                if (option.trim().equalsIgnoreCase("close")) {
                    return true;
                }
            }
        }
        return false;
    }
}
