package dev.sluice.server.http;

import io.vertx.core.Handler;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;

/**
 * The {@code close} connection option honoured when a client sends it among others ({@code Connection: TE,
 * close}, as some clients do): RFC 9112 §9.6 has the server close the connection after its answer. Vert.x
 * compares the whole {@code Connection} value with {@code close}, so such a connection stayed open (a bug
 * pinned in GatewayTest and CheckApiTest); for those requests the answer says {@code Connection: close} and
 * the connection is closed once it is written. A lone {@code close} is Vert.x's own to handle.
 */
final class CloseOption {
    private CloseOption() {
    }

    /** {@code handler}, with the close option honoured first. */
    static Handler<HttpServerRequest> honoured(Handler<HttpServerRequest> handler) {
        return request -> {
            if (asked(request)) {
                // just before the head is written, so whatever the handler did to the headers, it says so
                request.response().headersEndHandler(head -> request.response().putHeader(HttpHeaders.CONNECTION,
                        HttpHeaders.CLOSE));
                request.response().bodyEndHandler(ended -> request.connection().close()); // after what is written
            }
            handler.handle(request);
        };
    }

    /** Whether an HTTP/1.1 request names {@code close} among several connection options. */
    private static boolean asked(HttpServerRequest request) {
        if (request.version() != HttpVersion.HTTP_1_1) {
            return false;
        }
        String connection = request.getHeader(HttpHeaders.CONNECTION);
        if (connection == null || connection.indexOf(',') < 0) {
            return false;
        }
        for (String option : connection.split(",")) {
            if (option.trim().equalsIgnoreCase("close")) {
                return true;
            }
        }
        return false;
    }
}
