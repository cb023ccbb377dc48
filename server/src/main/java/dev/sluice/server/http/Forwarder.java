package dev.sluice.server.http;

import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;

import java.util.Map;

/**
 * Forwards one admitted request to the upstream and its answer back, streaming both bodies with
 * back-pressure (Vert.x pipes: a slow side pauses the other, nothing is held whole); only an answer of known
 * length up to 64 KiB is read whole first, so that it leaves in one write with its head. Hop-by-hop headers
 * (RFC 9110 §7.6.1) stay on their own hop; {@code Host} goes through unchanged; {@code X-Forwarded-For}
 * gets the connection's address appended. An upstream that cannot be reached, or fails before answering,
 * gives a {@code 502}, one that stays silent longer than the timeout a {@code 504}; one that fails halfway
 * through its answer has the client's connection closed, since a status already sent cannot be taken back.
 */
final class Forwarder {
    private static final String[] HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate",
            "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"};
    private static final String[] NONE = {};

    /** Answers up to this size are read whole and sent in one write; longer ones stream. */
    private static final long WHOLE = 64 * 1024;

    private final HttpClient client;
    private final String host;
    private final int port;
    private final long timeoutMs;

    /** @param timeoutMs how long the upstream may stay silent (before answering, or between two parts of an answer) */
    Forwarder(HttpClient client, String host, int port, long timeoutMs) {
        this.client = client;
        this.host = host;
        this.port = port;
        this.timeoutMs = timeoutMs;
    }

    /** Forwards {@code incoming} (paused) and answers it with the upstream's answer plus {@code added} headers. */
    void forward(HttpServerRequest incoming, Map<String, String> added) {
        RequestOptions options = new RequestOptions().setMethod(incoming.method()).setHost(host).setPort(port)
                .setURI(incoming.uri()).setIdleTimeout(timeoutMs);
        client.request(options).onComplete(opened -> {
            if (opened.failed()) {
                badGateway(incoming, opened.cause());
                return;
            }
            HttpClientRequest outgoing = opened.result();
            copy(incoming.headers(), outgoing.headers());
            String remote = incoming.remoteAddress() == null ? null : incoming.remoteAddress().hostAddress();
            if (remote != null) {
                String before = String.join(", ", incoming.headers().getAll("X-Forwarded-For"));
                outgoing.headers().set("X-Forwarded-For", before.isEmpty() ? remote : before + ", " + remote);
            }
            (hasBody(incoming.headers()) ? outgoing.send(incoming) : outgoing.send()).onComplete(answered -> {
                if (answered.failed()) {
                    badGateway(incoming, answered.cause());
                    return;
                }
                answer(incoming, answered.result(), added);
            });
        });
    }

    private static void answer(HttpServerRequest incoming, HttpClientResponse upstream, Map<String, String> added) {
        HttpServerResponse response = incoming.response();
        response.setStatusCode(upstream.statusCode()).setStatusMessage(upstream.statusMessage());
        copy(upstream.headers(), response.headers());
        added.forEach(response::putHeader);
        int status = upstream.statusCode();
        if (incoming.method() == HttpMethod.HEAD || status == 204 || status == 304) {
            // no body, whatever Content-Length says (for HEAD it is the length a GET would get, and stays)
            upstream.end().onComplete(ended -> response.end());
            return;
        }
        long length = contentLength(upstream.headers());
        if (length >= 0 && length <= WHOLE) {
            // small enough to go out in one write with the head, as nginx's proxy buffers do
            upstream.body().onComplete(body -> {
                if (body.succeeded()) {
                    response.end(body.result());
                } else {
                    badGateway(incoming, body.cause());
                }
            });
            return;
        }
        response.send(upstream).onFailure(failure -> {
            if (!response.headWritten()) {
                badGateway(incoming, failure);
            } else {
                incoming.connection().close(); // the answer broke off: the client must not take it for whole
            }
        });
    }

    /** Whether a request carries a body: a length above zero, or chunks. */
    private static boolean hasBody(MultiMap headers) {
        return contentLength(headers) > 0 || headers.contains(HttpHeaders.TRANSFER_ENCODING);
    }

    /** The Content-Length, or -1 when there is none (or it is not a number: then the body is streamed). */
    private static long contentLength(MultiMap headers) {
        String length = headers.get(HttpHeaders.CONTENT_LENGTH);
        if (length == null) {
            return -1;
        }
        try {
            return Long.parseLong(length.trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /**
     * Copies the end-to-end headers. Names are compared ignoring case without making lower-case copies, and the
     * {@code Connection} header's options are read once a message, not once a header: a profile of the gateway
     * at peak found this method making 7% of its garbage.
     */
    private static void copy(MultiMap from, MultiMap to) {
        // every line of it (a review found the second ignored); no list made for a message without one
        String[] named = !from.contains(HttpHeaders.CONNECTION) ? NONE
                : String.join(",", from.getAll(HttpHeaders.CONNECTION)).split(",");
        for (int i = 0; i < named.length; i++) {
            named[i] = named[i].trim();
        }
        for (Map.Entry<String, String> header : from) {
            String name = header.getKey();
            if (!among(HOP_BY_HOP, name) && !among(named, name)) {
                to.add(name, header.getValue());
            }
        }
    }

    /** Whether {@code name} is one of {@code names}, in any case. */
    private static boolean among(String[] names, String name) {
        for (String one : names) {
            if (one.equalsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    /** 504 when the upstream stayed silent too long, else 502; the upstream's headers, if copied, are dropped. */
    private static void badGateway(HttpServerRequest incoming, Throwable cause) {
        HttpServerResponse response = incoming.response();
        if (response.ended() || response.headWritten()) {
            incoming.connection().close();
            return;
        }
        incoming.handler(dropped -> { }).resume();
        boolean silent = cause instanceof java.util.concurrent.TimeoutException;
        response.headers().clear();
        response.setStatusCode(silent ? 504 : 502).putHeader("Content-Type", "application/json")
                .end(VerdictAnswer.JSON.createObjectNode().put("error", silent
                        ? "gateway timeout: the upstream did not answer in time"
                        : "bad gateway: the upstream failed" + (cause == null ? "" : ": " + cause.getMessage())).toString());
    }
}
