package dev.sluice.server.http;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpHeadersFactory;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.util.ReferenceCountUtil;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.net.impl.ConnectionBase;

import java.nio.channels.ClosedChannelException;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.function.Supplier;

/**
 * Forwards one admitted request to the upstream and its answer back, streaming both bodies with
 * back-pressure (a slow side pauses the other, nothing is held whole); only an answer of known length up to
 * 64 KiB is read whole first, so that it leaves in one write with its head. Hop-by-hop headers
 * (RFC 9110 §7.6.1) stay on their own hop; {@code Host} goes through unchanged; {@code X-Forwarded-For}
 * gets the connection's address appended. An upstream that cannot be reached, or fails before answering,
 * gives a {@code 502}, one that stays silent longer than the timeout a {@code 504}; one that fails halfway
 * through its answer has the client's connection closed, since a status already sent cannot be taken back.
 *
 * <h2>Why Netty, not Vert.x's HTTP client</h2>
 * The requests come in through Vert.x's server; they go out on Netty channels of the same event loop
 * ({@link UpstreamConnections}), written and read by this class. Measured side by side on loopback (bench/README.md,
 * eighteenth session), a proxy on Vert.x's server with this kind of client answered about 15% more requests a second
 * than the same proxy on Vert.x's client, and at half load added about 0.3 ms less at p99: Vert.x's client pays for
 * its pool, its futures and its request objects on every request, which a loop that owns its connections does not need.
 */
final class Forwarder {
    private static final String[] HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate",
            "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"};
    static final String[] NONE = {};
    /** The methods a request may be repeated with, the upstream left as if it had been sent once (RFC 9110 §9.2.2). */
    private static final Set<HttpMethod> IDEMPOTENT = Set.of(HttpMethod.GET, HttpMethod.HEAD, HttpMethod.OPTIONS,
            HttpMethod.TRACE, HttpMethod.PUT, HttpMethod.DELETE);
    /** The headers of requests sent upstream, checked again as they are set (a bare CR never goes on). */
    private static final DefaultHttpHeadersFactory HEADERS = DefaultHttpHeadersFactory.headersFactory()
            .withNameValidation(true).withValueValidation(true);

    /** Answers up to this size are read whole and sent in one write; longer ones stream. */
    private static final long WHOLE = 64 * 1024;

    private final UpstreamConnections connections;
    /** {@code Host} for a request that has none (HTTP/1.0): the upstream's, as the URL names it. */
    private final String upstreamHost;
    /** Told of each admitted request the gateway could not carry through: what it answered in its place. */
    private final java.util.function.Consumer<String> failed;
    /** Where the reasons of 502s go: the gateway's log, its one for every loop. */
    private final UpstreamFailures reasons;

    /**
     * @param failed  told, for each admitted request that got no answer of the upstream's, what the gateway did
     *                instead: {@code "502"}, {@code "504"}, {@code "408"}, {@code "400"}, or {@code "cut_off"} (its
     *                answer had begun, and its connection was closed)
     * @param reasons told why of each 502
     */
    Forwarder(UpstreamConnections connections, String upstreamHost, java.util.function.Consumer<String> failed,
              UpstreamFailures reasons) {
        this.connections = connections;
        this.upstreamHost = upstreamHost;
        this.failed = failed;
        this.reasons = reasons;
    }

    /**
     * Forwards {@code incoming} (paused) and answers it with the upstream's answer plus the headers {@code added}
     * gives as the answer's head is written: a reset counts from then, not from the decision, however long the
     * upstream takes (a review found it late by the upstream's time).
     */
    void forward(HttpServerRequest incoming, Supplier<Map<String, String>> added) {
        boolean body = hasBody(incoming.headers());
        HttpRequest head;
        try {
            head = head(incoming, body);
        } catch (IllegalArgumentException e) { // a header Netty will not send (Vert.x read it)
            dropRest(incoming);
            failed.accept("400"); // counted before it is answered, so that a client that has its answer sees it counted
            answer(incoming, 400, "Bad Request", e.getMessage(), added.get());
            return;
        }
        Exchange exchange = new Exchange(incoming, added, head, body);
        incoming.exceptionHandler(failure -> exchange.clientGone());
        incoming.response().exceptionHandler(failure -> exchange.clientGone());
        connections.lease(exchange);
    }

    /** The request as it goes upstream: HTTP/1.1, its end-to-end headers, {@code X-Forwarded-For} and a Host. */
    private HttpRequest head(HttpServerRequest incoming, boolean body) {
        io.netty.handler.codec.http.HttpMethod method = io.netty.handler.codec.http.HttpMethod.valueOf(incoming.method().name());
        HttpRequest head = body
                ? new DefaultHttpRequest(HttpVersion.HTTP_1_1, method, incoming.uri(), HEADERS)
                : new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, method, incoming.uri(), Unpooled.EMPTY_BUFFER,
                HEADERS, HEADERS);
        HttpHeaders headers = head.headers();
        MultiMap from = incoming.headers();
        copy(from, from.contains(io.vertx.core.http.HttpHeaders.CONNECTION)
                ? from.getAll(io.vertx.core.http.HttpHeaders.CONNECTION) : List.of(), headers::add);
        String remote = incoming.remoteAddress() == null ? null : incoming.remoteAddress().hostAddress();
        if (remote != null) {
            String before = String.join(", ", incoming.headers().getAll("X-Forwarded-For"));
            headers.set("X-Forwarded-For", before.isEmpty() ? remote : before + ", " + remote);
        }
        if (!headers.contains(HttpHeaderNames.HOST)) {
            headers.set(HttpHeaderNames.HOST, upstreamHost);
        }
        if (body && !headers.contains(HttpHeaderNames.CONTENT_LENGTH)) {
            HttpUtil.setTransferEncodingChunked(head, true);
        }
        return head;
    }

    /**
     * The last handler of each connection to the upstream: hands what it reads, its silence, its closing and its
     * room to write to the exchange it carries.
     */
    static final class Relay extends ChannelInboundHandlerAdapter {
        private Exchange exchange;
        private Throwable failure;

        @Override
        public void channelRead(ChannelHandlerContext context, Object message) {
            if (exchange == null) {
                ReferenceCountUtil.release(message);
                context.close(); // an answer to nothing: the connection can no longer be trusted
                return;
            }
            exchange.received((HttpObject) message);
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext context, Object event) throws Exception {
            if (!(event instanceof IdleStateEvent)) {
                super.userEventTriggered(context, event);
            } else if (exchange != null) {
                exchange.silent();
            } else {
                context.close(); // idle for the upstream timeout
            }
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext context) throws Exception {
            if (exchange != null) {
                exchange.writable(context.channel().isWritable());
            }
            super.channelWritabilityChanged(context);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext context, Throwable cause) {
            failure = cause;
            context.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext context) throws Exception {
            if (exchange != null) {
                exchange.closed(failure);
            }
            super.channelInactive(context);
        }
    }

    /**
     * One request and its answer. Everything runs on the event loop of both the request and its connection to the
     * upstream. Once over, it lets go of the connection ({@link #detach}) and nothing it does touches it again.
     */
    private final class Exchange implements UpstreamConnections.Lease {
        private final HttpServerRequest incoming;
        private final HttpServerResponse response;
        private final Supplier<Map<String, String>> added;
        private final HttpRequest head;
        private final boolean body;
        private Channel channel;
        private Relay relay;
        private boolean reused;
        private boolean retried;
        /** Whether anything of the answer has come. */
        private boolean heard;
        private boolean requestSent;
        private boolean over;
        /** Skipping a 1xx answer the upstream sent before its answer; and whether one was. */
        private boolean informational;
        private boolean sawInformational;
        private boolean bodiless;
        private boolean keepAlive;
        /** The answer read whole before it is sent, else null. */
        private Buffer whole;
        /** Closes the client's connection if it has not read on within the timeout; while reading is paused for it. */
        private ScheduledFuture<?> stalled;

        Exchange(HttpServerRequest incoming, Supplier<Map<String, String>> added, HttpRequest head, boolean body) {
            this.incoming = incoming;
            this.response = incoming.response();
            this.added = added;
            this.head = head;
            this.body = body;
        }

        @Override
        public void granted(Channel granted, boolean reused) {
            if (over) {
                connections.giveBack(granted); // the client left while it waited for a connection
                return;
            }
            channel = granted;
            this.reused = reused;
            relay = granted.pipeline().get(Relay.class);
            relay.exchange = this;
            relay.failure = null;
            if (!body) {
                requestSent = true;
                channel.writeAndFlush(head);
                return;
            }
            channel.writeAndFlush(head); // flushed: the write restarts the connection's clock of silence
            incoming.handler(chunk -> {
                if (!over) {
                    channel.writeAndFlush(new DefaultHttpContent(Unpooled.wrappedBuffer(chunk.getBytes())));
                    if (!channel.isWritable()) {
                        incoming.pause(); // resumed when the connection can take more (writable)
                    }
                }
            });
            incoming.endHandler(ended -> {
                if (!over) {
                    requestSent = true;
                    channel.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
                }
            });
            incoming.resume();
        }

        @Override
        public void failed(Throwable cause) {
            if (!over) {
                over = true;
                badGateway(incoming, cause, added.get(), failed, reasons);
            }
        }

        void writable(boolean writable) {
            if (writable && !over && !requestSent) {
                incoming.resume();
            }
        }

        void received(HttpObject message) {
            heard = true;
            try {
                if (message.decoderResult().isFailure()) {
                    end(message.decoderResult().cause());
                    return;
                }
                if (message instanceof HttpResponse answerHead && !begin(answerHead)) {
                    return;
                }
                if (message instanceof HttpContent content) {
                    if (informational) {
                        informational = !(content instanceof LastHttpContent);
                        return;
                    }
                    if (!bodiless && content.content().isReadable()) {
                        Buffer part = Buffer.buffer(ByteBufUtil.getBytes(content.content()));
                        if (whole != null) {
                            whole.appendBuffer(part);
                        } else {
                            response.write(part);
                            if (response.writeQueueFull()) {
                                waitForClient();
                            }
                        }
                    }
                    if (content instanceof LastHttpContent) {
                        if (whole != null) {
                            response.end(whole);
                        } else if (!bodiless && !response.isChunked()
                                && !response.headers().contains(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH)) {
                            // an HTTP/1.0 client, an answer of unknown length: it ends when the connection does
                            response.end().onComplete(ended -> incoming.connection().close());
                        } else {
                            response.end();
                        }
                        if (requestSent) {
                            finish();
                        } else {
                            // answered before the request's body was all sent: the rest is read and dropped, and
                            // the connection, halfway through a request, is not used again
                            over = true;
                            dropRest(incoming);
                            detach(false);
                        }
                    }
                }
            } finally {
                ReferenceCountUtil.release(message);
            }
        }

        /**
         * The head of the upstream's answer: its status and headers become the client's, with {@link #added}.
         * Whether the exchange goes on (a HEAD after a 1xx answer ends here).
         */
        private boolean begin(HttpResponse answer) {
            int status = answer.status().code();
            if (status < 100 || status > 599) {
                // a status is three digits (RFC 9110 §15); Netty reads more, and "2000" reached the client as it came
                // (found by trying the gateway)
                end(new java.net.ProtocolException("the upstream answered status " + status
                        + ", which HTTP does not have"));
                return false;
            }
            if (status < 200) {
                informational = true; // 100 Continue, 103 Early Hints: not the answer
                sawInformational = true;
                return true;
            }
            response.setStatusCode(status).setStatusMessage(answer.status().reasonPhrase());
            HttpHeaders from = answer.headers();
            copy(from, from.contains(HttpHeaderNames.CONNECTION) ? from.getAll(HttpHeaderNames.CONNECTION) : List.of(),
                    response.headers()::add);
            addRateLimitHeaders(response.headers(), added.get());
            // no body, whatever Content-Length says (for HEAD it is the length a GET would get, and stays)
            bodiless = incoming.method() == HttpMethod.HEAD || status == 204 || status == 304;
            long length = contentLength(answer.headers().get(HttpHeaderNames.CONTENT_LENGTH));
            // an answer that ends where its connection does leaves nothing to carry another request on
            keepAlive = HttpUtil.isKeepAlive(answer)
                    && (bodiless || length >= 0 || HttpUtil.isTransferEncodingChunked(answer));
            if (incoming.method() == HttpMethod.HEAD && sawInformational) {
                // Netty's codec forgets that a HEAD was asked once a 1xx answer has come, and would wait for a body:
                // the answer is whole with its head, and the connection, out of step, is closed
                over = true;
                response.end();
                if (!requestSent) {
                    dropRest(incoming);
                }
                detach(false);
                return false;
            }
            if (bodiless) {
                return true;
            }
            if (length >= 0 && length <= WHOLE) {
                whole = Buffer.buffer((int) length); // to go out in one write with the head, as nginx's proxy buffers do
            } else if (length < 0) {
                response.setChunked(true); // no effect for an HTTP/1.0 client: its answer ends with the connection
            }
            return true;
        }

        /** The client reads slower than the upstream sends: read no more from the upstream until it catches up. */
        private void waitForClient() {
            if (!channel.config().isAutoRead()) {
                return; // waiting already: the rest of a read comes in after the queue filled (a review found a timer each)
            }
            channel.config().setAutoRead(false);
            stalled = channel.eventLoop().schedule(() -> {
                if (!over) {
                    failed.accept("cut_off");
                    cutOff(incoming.connection()); // nothing read for the timeout, as nginx's send_timeout
                }
            }, connections.timeoutMs(), TimeUnit.MILLISECONDS); // the upstream's timeout, for a client as slow
            response.drainHandler(drained -> {
                stalled.cancel(false);
                if (!over) {
                    channel.config().setAutoRead(true);
                }
            });
        }

        /** Answered, and the request sent whole: the connection carries the next request, unless it is closing. */
        private void finish() {
            over = true;
            detach(keepAlive);
        }

        /**
         * Neither a byte read nor written on the connection for the timeout. While reading is paused for a slow
         * client the upstream is not the one silent ({@link #waitForClient} watches the client); while the request's
         * body is still coming, the client is: a 408, as nginx's {@code client_body_timeout} answers.
         */
        void silent() {
            if (!channel.config().isAutoRead()) {
                return;
            }
            if (!requestSent && channel.isWritable()) { // else the upstream stopped reading the body: it is silent
                if (!over) {
                    over = true;
                    detach(false);
                    dropRest(incoming);
                    if (response.headWritten()) {
                        failed.accept("cut_off");
                        cutOff(incoming.connection()); // the answer, begun, cannot end: nothing of it to wait for
                    } else { // the connection, halfway through a request, is closed once the answer is out
                        failed.accept("408");
                        answer(incoming, 408, "Request Timeout", "request timeout: the request's body stopped coming",
                                added.get())
                                .onComplete(sent -> incoming.connection().close());
                    }
                }
                return;
            }
            end(new TimeoutException("the upstream did not answer in time"));
        }

        /**
         * The connection closed, or failed, before the answer was whole. A connection kept from an earlier request
         * that closes before a byte of the answer has come was most likely closed by the upstream as idle while the
         * request was on its way (every server closes idle connections, some after a few seconds): a request with
         * no body whose method may be repeated (RFC 9110 §9.2.2) is sent again, on another connection, as nginx
         * does. Others are a 502, since the upstream may have acted on them.
         */
        void closed(Throwable failure) {
            if (reused && !retried && !body && IDEMPOTENT.contains(incoming.method()) && !heard && !over) {
                retried = true;
                relay.exchange = null;
                channel = null;
                connections.lease(this);
                return;
            }
            end(failure != null ? failure : new ClosedChannelException());
        }

        /** The exchange fails: a 502 or 504 if the answer has not begun, else the client's connection closed. */
        private void end(Throwable cause) {
            if (over) {
                return;
            }
            over = true;
            detach(false);
            badGateway(incoming, cause, added.get(), failed, reasons);
        }

        /** The client is gone: the connection, in the middle of an exchange nobody will read, is closed. */
        void clientGone() {
            if (over) {
                return;
            }
            over = true;
            if (channel != null) {
                detach(false);
            } else {
                connections.cancel(this); // it waited for a connection: charged, never forwarded
                failed.accept("left_while_held");
            }
        }

        /** Lets go of the connection: given back for the next request, or closed. */
        private void detach(boolean reusable) {
            relay.exchange = null;
            if (stalled != null) {
                stalled.cancel(false);
            }
            if (!channel.config().isAutoRead()) {
                channel.config().setAutoRead(true);
            }
            if (reusable) {
                connections.giveBack(channel);
            } else {
                channel.close();
            }
        }
    }

    /** Whether a request carries a body: a length above zero, or chunks. */
    private static boolean hasBody(MultiMap headers) {
        return contentLength(headers.get(io.vertx.core.http.HttpHeaders.CONTENT_LENGTH)) > 0
                || headers.contains(io.vertx.core.http.HttpHeaders.TRANSFER_ENCODING);
    }

    /** A Content-Length, or -1 when there is none (or it is not a number: then the body is streamed). */
    private static long contentLength(String length) {
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
    private static void copy(Iterable<Map.Entry<String, String>> from, List<String> connection,
                             BiConsumer<String, String> to) {
        String[] named = options(connection);
        for (Map.Entry<String, String> header : from) {
            String name = header.getKey();
            if (goesOn(name, named)) {
                to.accept(name, header.getValue());
            }
        }
    }

    /** The options of a message's {@code Connection} headers: the header names they take off it. */
    static String[] options(List<String> connection) {
        // every line of it (a review found the second ignored); the callers make no list for a message without one
        String[] named = connection.isEmpty() ? NONE : String.join(",", connection).split(",");
        for (int i = 0; i < named.length; i++) {
            named[i] = named[i].trim();
        }
        return named;
    }

    /** Whether the header {@code name} goes on to the next hop, its message's Connection options {@code named}. */
    static boolean goesOn(String name, String[] named) {
        return !among(HOP_BY_HOP, name) && (!among(named, name) || among(NEVER_NAMED_AWAY, name));
    }

    /**
     * Headers a {@code Connection} option never takes off a message: {@code Connection: Host} took off the Host the
     * policies had matched, and the upstream's own took its place, so a request for another host escaped the
     * {@code host:} policies and was served by the upstream's default site (a review found it); a length taken off
     * would change how the body is delimited. RFC 9110 7.6.1 has a sender never name them; nginx reads no options.
     */
    private static final String[] NEVER_NAMED_AWAY = {"Host", "Content-Length"};

    /** Whether {@code name} is one of {@code names}, in any case. */
    private static boolean among(String[] names, String name) {
        for (String one : names) {
            if (one.equalsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Closes a client's connection at once, what waits to be written dropped. Vert.x's {@code close()} first writes
     * what waits and closes once that is written, which a client that reads nothing never lets happen: such a
     * connection stayed open for good, its buffers with it (a review found it; GatewayClientsTest looks at the socket
     * table). Closing its Netty channel is no better: Vert.x's handler in the pipeline turns that close into the
     * same {@code close()}. The close goes from that handler's place on, toward the socket, as Vert.x's own idle
     * timeout closes a connection.
     */
    static void cutOff(HttpConnection connection) {
        ((ConnectionBase) connection).channelHandlerContext().close();
    }

    /**
     * What is left of the request's body is read and dropped, so that the connection is ready for the client's next
     * request. A bug a test found: on a request read whole, Vert.x refuses a handler (it throws), and the 502 that
     * followed was never sent.
     */
    static void dropRest(HttpServerRequest incoming) {
        if (!incoming.isEnded()) {
            incoming.handler(dropped -> { }).endHandler(ended -> { }).resume();
        }
    }

    /**
     * 504 when the upstream stayed silent too long, else 502; the upstream's headers, if copied, are dropped, and
     * the rate limit's {@code added} kept; {@code failed} is told what it did.
     */
    private static void badGateway(HttpServerRequest incoming, Throwable cause, Map<String, String> added,
                                   java.util.function.Consumer<String> failed, UpstreamFailures reasons) {
        HttpServerResponse response = incoming.response();
        // each counted before it is answered: a client that has its 502 sees it counted (a test found it racing)
        if (response.ended()) {
            failed.accept("cut_off");
            incoming.connection().close(); // what is left of a whole answer goes out first
            return;
        }
        if (response.headWritten()) {
            failed.accept("cut_off");
            cutOff(incoming.connection()); // the answer, begun, cannot end: nothing of it to wait for
            return;
        }
        dropRest(incoming);
        if (cause instanceof TimeoutException) {
            failed.accept("504");
            answer(incoming, 504, "Gateway Timeout", "gateway timeout: " + cause.getMessage(), added);
            return;
        }
        failed.accept("502");
        reasons.failed(cause); // why goes to the log: it names the upstream's address (see there)
        answer(incoming, 502, "Bad Gateway", "bad gateway: the upstream failed", added);
    }

    /**
     * Answers here, in place of whatever the upstream's head had set: {@code status} and {@code {"error": message}},
     * with the rate limit's {@code added} headers: the request was admitted and charged, and a client retrying a 502
     * must see its quota shrink before the 429 (found by trying the gateway: they were left out).
     */
    private static Future<Void> answer(HttpServerRequest incoming, int status, String reason, String message,
                                       Map<String, String> added) {
        HttpServerResponse response = incoming.response();
        response.headers().clear();
        added.forEach(response::putHeader);
        return response.setChunked(false).setStatusCode(status).setStatusMessage(reason)
                .putHeader("Content-Type", "application/json")
                .end(JsonNodeFactory.instance.objectNode().put("error", message).toString());
    }

    /**
     * Puts {@code added} on an upstream's answer whose {@code headers} may carry rate limit headers of their own (a
     * limiter behind the gateway), telling the client the truth of both (found by trying the gateway: the
     * upstream's were replaced, and its 429 with {@code r=0} reached the client as {@code r=99999}). The IETF
     * fields are lists: the gateway's items follow the upstream's. The legacy fields describe one limit: that of
     * the two with the fewer remaining, as the gateway reports its own closest policy. Any other header is set.
     */
    private static void addRateLimitHeaders(io.vertx.core.MultiMap headers, Map<String, String> added) {
        boolean upstreamCloser = false;
        String theirs = headers.get("X-RateLimit-Remaining");
        String ours = added.get("X-RateLimit-Remaining");
        if (theirs != null && ours != null) {
            try {
                upstreamCloser = Long.parseLong(theirs.trim()) < Long.parseLong(ours);
            } catch (NumberFormatException e) {
                // not a count: the gateway's is the one to trust
            }
        }
        for (Map.Entry<String, String> header : added.entrySet()) {
            String name = header.getKey();
            // contains first: nearly every upstream sends none, and the gateway's hot path makes no list for them
            if ((name.equals("RateLimit") || name.equals("RateLimit-Policy")) && headers.contains(name)) {
                headers.set(name, String.join(", ", headers.getAll(name)) + ", " + header.getValue());
            } else if (!(upstreamCloser && name.startsWith("X-RateLimit-"))) {
                headers.set(name, header.getValue());
            }
        }
    }
}
