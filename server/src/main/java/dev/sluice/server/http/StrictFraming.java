package dev.sluice.server.http;

import dev.sluice.server.ClientConnections;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.AsciiString;
import io.netty.util.ReferenceCountUtil;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.impl.VertxHttpRequestDecoder;
import io.vertx.core.net.impl.ConnectionBase;

import java.util.List;

/**
 * Requests to the gateway and the API framed one way only: a request whose body another server could delimit
 * otherwise is refused with a 400 that names why, and nothing after it on its connection is read (RFC 9112 §6.1
 * and §6.3, as nginx refuses them). Netty's decoder, which Vert.x uses, is lenient, and a gateway that delimits a
 * body otherwise than the server behind or in front of it lets a request be smuggled past its limits. Found by trying
 * the gateway:
 * <ul>
 *   <li>{@code Transfer-Encoding: xchunked} (or {@code identity}, anything not {@code chunked}): Netty read no body,
 *       so the body was read as the next request, and forwarded as one (the upstream got {@code GET /smuggled});</li>
 *   <li>{@code Content-Length} with {@code Transfer-Encoding: chunked}: Netty dropped the length and kept the
 *       connection, where the RFC has the server close it; a front server that went by the length sees other
 *       requests than the gateway does;</li>
 *   <li>{@code Transfer-Encoding: gzip, chunked}: forwarded as plain {@code chunked}, the gzip coding lost (nginx
 *       answers 501 to a coding it does not know; here 400 with the others);</li>
 *   <li>{@code Transfer-Encoding} in an HTTP/1.0 request, which has no such framing;</li>
 *   <li>{@code Content-Length} twice in an HTTP/1.0 request: Netty took the first of two lengths there (it refuses
 *       them in HTTP/1.1), where a front server that takes the last reads other requests (a review found it).</li>
 * </ul>
 * How: the connection's decoder is replaced, as the connection is made and before a byte is read, by one that
 * checks a request's framing headers once they are read. A check that fails is the decoder's failure: the request
 * goes to the server's handler of malformed requests (400, {@code Connection: close}), and the decoder discards
 * the rest of the connection, so that a body mistaken for a request is never read as one.
 *
 * <p>It also reads a client's pipelined requests as nginx does, a few at a time: once {@link #MOST_AHEAD} requests are
 * read whose answers are not yet sent to the socket, or while the answers already made wait for a socket that takes
 * no more (Netty's mark: the connection is not writable), the decoder stops at the end of the request it has read and
 * the connection stops reading; both go on once the answers are sent. What the client sends meanwhile waits in its own
 * socket. Why:
 * <ul>
 *   <li>Vert.x reads on whatever waits, and puts each request read at the end of a list it walks from the start, so
 *       a client pipelining 200,000 requests in one stream (6.6 MB) kept an event loop busy for good and every other
 *       client of that loop waited seconds (found by trying the gateway).</li>
 *   <li>Vert.x answers them whether the client reads or not, and what the socket cannot take waits in Netty's buffer.
 *       A client that pipelined requests the gateway rejected and read nothing had 558,000 answers waiting there
 *       (4 connections, a server of 256 MB out of memory, and dead for every client after it left); one that
 *       pipelined {@code GET /metrics} had the direct memory run out and the event loop stall (a review found both).
 *       </li>
 *   <li>Cutting such a client off instead (a reset past 1,000 requests waiting, or 1 MiB of answers), as this class
 *       first did, cut honest clients too: one that pipelined more than 1,000 requests whose answers waited on the
 *       upstream or on Redis, or large downloads over a slow link.</li>
 * </ul>
 * So a connection holds at most {@link #MOST_AHEAD} answers beyond the 64 KB a writable socket takes, and an answer
 * the gateway makes whole is at most 64 KiB (larger ones stream, waiting for the client): under 1 MiB for a client
 * that reads nothing, who then sends into a full socket and is let go as idle. An honest client gets every answer, as
 * fast as it reads them. Only the bound over every connection still cuts: while more than
 * {@link ClientConnections#mostUnsentAnswers()} waits in the whole process, a connection given another answer while
 * more than {@link #LEAST_CUT_FOR_ALL} waits for it is reset. The answers are counted on their way out
 * ({@link Answers}, beside Vert.x's handler in the pipeline), as written and as sent, so the count needs nothing of
 * the server's request handler; reading is held by {@link Reads}, first in the pipeline, which every read asked of
 * the channel passes.
 *
 * <p>Holding reads shares the channel's {@code autoRead} with Vert.x, which turns it off while a request's body waits
 * for its handler and on once the body is taken. A hold begins at the end of a request, or after a head kept back
 * (below) that Vert.x has not seen, so no body comes to Vert.x while it lasts and Vert.x cannot pause then; it can only resume, and the read that asks for is held too. When the
 * hold ends, reading is as Vert.x last left it: on if it resumed meanwhile or had never paused, off if it still waits.
 *
 * <p>And a request whose body is still to come is not handed to Vert.x while an answer before it is unwritten: its
 * head is kept back, and the connection held, until they are written (nginx reads the next request only then). Vert.x
 * queues such a request behind the one answered, and a connection that closed while its body came threw in Vert.x
 * ({@code NullPointerException}: a waiting request has no answer yet) before Vert.x let go of the request before it
 * or of the connection: its place among the process's connections and the concurrency place of the request before
 * were never given back, and 3.5 KB were logged (a review found it). A body that breaks off unreadable (a chunk size
 * that is not hex) behind another request threw there too, and that request, handed on later, was decided, forwarded
 * and held until the upstream timeout (found by trying the gateway); kept back, it is the request being handled when
 * its body breaks, which Vert.x answers at once, as one that came first.
 */
final class StrictFraming extends VertxHttpRequestDecoder {
    /** The names Vert.x gives the decoder and its own handler in a connection's pipeline. */
    private static final String DECODER = "httpDecoder";
    private static final String VERTX = "handler";
    /** The name of the handler that holds reads ({@link Reads}). */
    static final String READS = "sluiceReads";
    /**
     * The most requests of one connection read and not yet answered to the socket. Fifteen answers the gateway makes
     * whole (up to 64 KiB each) and the 64 KB a writable socket holds stay under 1 MiB a connection; the API's answers
     * are smaller, but for {@code /metrics}, which grows with the policies.
     */
    static final int MOST_AHEAD = 15;
    /**
     * While more than {@link ClientConnections#mostUnsentAnswers()} waits over every connection, the most bytes
     * waiting for one when another answer begins: Netty's mark past which a connection is not writable.
     */
    static final long LEAST_CUT_FOR_ALL = 64 * 1024;

    /** The Content-Length headers of the request being read (Netty keeps one of them); on the event loop only. */
    private int lengths;
    /** Requests read, answers written, and answers sent to the socket; on the connection's event loop only. */
    private long read;
    private long answered;
    private long sent;
    /** The head of a request whose body is still to come, kept back until the answers before it are written. */
    private HttpRequest headKept;
    /** A request read but not yet its last part: the decoder is inside it, and holds only between requests. */
    private boolean insideRequest;
    /** Reading and decoding wait for answers to be sent; whether reading was on when the hold began; a resume due. */
    private boolean held;
    private boolean readingBefore;
    private boolean resumeDue;
    /** The client has shut its side; and every request it sent is decoded (the connection closes once answered). */
    private boolean inputShut;
    private boolean inputEnded;

    private StrictFraming(HttpServerOptions options) {
        super(options);
    }

    /** Puts the strict decoder in place of Vert.x's on a connection just made (nothing read yet). */
    static void install(HttpConnection connection, HttpServerOptions options, ClientConnections clients) {
        ChannelPipeline pipeline = ((ConnectionBase) connection).channel().pipeline();
        StrictFraming strict = new StrictFraming(options);
        // a client that shuts its side between requests is answered those it sent, then closed (userEventTriggered)
        ((ConnectionBase) connection).channel().config().setOption(ChannelOption.ALLOW_HALF_CLOSURE, true);
        pipeline.replace(DECODER, DECODER, strict);
        pipeline.addBefore(VERTX, "sluiceAnswers", strict.new Answers(clients));
        pipeline.addFirst(READS, strict.new Reads());
    }

    /** Every read asked of the channel passes here, first in the pipeline, and waits while the connection is held. */
    private final class Reads extends ChannelOutboundHandlerAdapter {
        @Override
        public void read(ChannelHandlerContext context) {
            if (!held) {
                context.read();
            }
        }
    }

    /** Too many answers unsent, or the socket full: no further request is read. */
    private boolean mustWait(ChannelHandlerContext context) {
        return read - sent >= MOST_AHEAD || !context.channel().isWritable();
    }

    /** What holds the connection has passed: the answers are sent, and a head kept back may go, its turn come. */
    private boolean free(ChannelHandlerContext context) {
        return !mustWait(context) && (headKept == null || answered == read);
    }

    /**
     * Whether the body of {@code request} is still to come, beyond what {@code in} holds: a chunked one always (its end
     * is known only once read), one of a known length longer than what is here.
     */
    private static boolean bodyToCome(HttpRequest request, ByteBuf in) {
        if (!request.decoderResult().isSuccess()) {
            return false;
        }
        return HttpUtil.isTransferEncodingChunked(request) || HttpUtil.getContentLength(request, 0L) > in.readableBytes();
    }

    /** Stops reading, on the event loop, as the decoder stops between two requests. */
    private void hold(ChannelHandlerContext context) {
        if (!held) {
            held = true;
            ChannelConfig config = context.channel().config();
            readingBefore = config.isAutoRead();
            config.setAutoRead(false); // takes the socket out of the reads at once, within this read too
        }
    }

    /** Once what held the connection has passed, resumes it on the event loop: not inside the write that let it go. */
    private void resumeWhenFree(ChannelHandlerContext context) {
        if (held && !resumeDue && free(context)) {
            resumeDue = true;
            context.channel().eventLoop().execute(() -> resume(context));
        }
    }

    private void resume(ChannelHandlerContext context) {
        resumeDue = false;
        if (!held || !context.channel().isActive() || !free(context)) {
            return;
        }
        held = false;
        ChannelConfig config = context.channel().config();
        if (config.isAutoRead()) {
            context.channel().read(); // Vert.x resumed while held: the read that asked for was held
        } else if (readingBefore) {
            config.setAutoRead(true); // and reads
        }
        ChannelHandlerContext decoder = context.pipeline().context(this);
        if (decoder == null) {
            return;
        }
        try {
            if (headKept != null) { // its turn: handed on, its body decoded below as it comes
                HttpRequest head = headKept;
                headKept = null;
                read++;
                insideRequest = true;
                decoder.fireChannelRead(head);
                if (actualReadableBytes() == 0) {
                    decoder.fireChannelReadComplete();
                }
            }
            if (actualReadableBytes() > 0) { // the requests read before the hold, not yet decoded
                channelRead(decoder, Unpooled.EMPTY_BUFFER);
                channelReadComplete(decoder); // Vert.x flushes the answers it made at the end of a read
            }
            endInputOnceDecoded(decoder);
        } catch (Exception e) { // as a read's would: Vert.x closes the connection
            decoder.fireExceptionCaught(e);
        }
    }

    /**
     * The client has shut its side of the connection. While one of its requests is being handled, that is the client
     * leaving, as nginx takes it: the connection closes, and what it held undecoded is never decided (a request held
     * for its turn is not forwarded, a place it waited for is given back). Between requests, it is a client that has
     * sent all it will (a half-close, as {@code nc -N} or a client that writes its requests and then
     * {@code shutdown(SHUT_WR)}s does): the requests it pipelined, read but held, are decoded and answered in turn,
     * and the connection closes after the last. Netty's decoder would have decoded them at once, past the hold, and
     * dropped what it could not: they were lost unanswered (a review found 45 of 100 answered). A client that writes
     * its requests and shuts its side at once is thus answered where the first is answered as it is read (the API on
     * the in-memory store), not where it waits on the upstream or on Redis: nginx closes on such a client too.
     */
    @Override
    public void userEventTriggered(ChannelHandlerContext context, Object event) throws Exception {
        if (event instanceof ChannelInputShutdownEvent) {
            if ((read != sent || headKept != null) && !inputShut) { // leaving mid-request
                context.channel().close();
                return;
            }
            inputShut = true;
            if (!held && actualReadableBytes() > 0) {
                channelRead(context, Unpooled.EMPTY_BUFFER); // what came with the end, up to a hold
                channelReadComplete(context);
            }
            endInputOnceDecoded(context);
            return;
        }
        super.userEventTriggered(context, event);
    }

    /** Once the client's side is shut and nothing holds what it sent: the decoder's end, then the connection's. */
    private void endInputOnceDecoded(ChannelHandlerContext decoder) throws Exception {
        if (!inputShut || inputEnded || held || !decoder.channel().isActive()) {
            return;
        }
        inputEnded = true;
        super.userEventTriggered(decoder, ChannelInputShutdownEvent.INSTANCE); // a request cut short is failed there
        closeOnceAnswered(decoder);
    }

    /** Closes a connection whose client has shut its side, once every request it sent is answered to the socket. */
    private void closeOnceAnswered(ChannelHandlerContext context) {
        if (inputEnded && sent == read && context.channel().isActive()) {
            context.channel().close();
        }
    }

    /**
     * Counts the answers Vert.x writes, and those sent: each ends with a last part (informational answers, 1xx, do not
     * count), sent once its write is done. And cuts off a connection given an answer while too much waits unsent.
     */
    private final class Answers extends ChannelDuplexHandler {
        private final ClientConnections clients;
        /** What this connection last counted in the process's bytes of answers waiting. */
        private long counted;

        Answers(ClientConnections clients) {
            this.clients = clients;
        }

        @Override
        public void write(ChannelHandlerContext context, Object message, ChannelPromise promise) {
            boolean informational = message instanceof HttpResponse head
                    && head.status().codeClass() == HttpStatusClass.INFORMATIONAL;
            if (message instanceof HttpResponse && !informational && tooMuchWaits(context)) {
                context.flush(); // what a read's answers left unflushed, as in decode
                settle(context);
                if (tooMuchWaits(context)) {
                    context.write(message, promise); // Vert.x's to release, as the connection closes
                    cutOff(context);
                    return;
                }
            }
            if (message instanceof LastHttpContent && !informational) {
                answered++;
                ChannelPromise counted = promise.unvoid(); // Vert.x writes with a void promise, which takes no listener
                counted.addListener(written -> {
                    if (written.isSuccess()) {
                        sent++;
                        resumeWhenFree(context);
                        closeOnceAnswered(context);
                    }
                    settle(context);
                });
                promise = counted;
            }
            context.write(message, promise);
            settle(context);
        }

        /** More than 64 KB waits for this connection while the process's bound is passed. */
        private boolean tooMuchWaits(ChannelHandlerContext context) {
            return unsent(context) > LEAST_CUT_FOR_ALL && clients.unsentAnswers() > clients.mostUnsentAnswers();
        }

        /** Brings this connection's count in the process's total up to date. */
        private void settle(ChannelHandlerContext context) {
            long now = unsent(context);
            if (now != counted) {
                clients.unsentChanged(now - counted);
                counted = now;
            }
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext context) throws Exception {
            settle(context); // drained below the low mark, or filled past the high one
            resumeWhenFree(context);
            super.channelWritabilityChanged(context);
        }

        @Override
        public void channelInactive(ChannelHandlerContext context) throws Exception {
            clients.unsentChanged(-counted);
            counted = 0;
            super.channelInactive(context);
        }

        private static long unsent(ChannelHandlerContext context) {
            ChannelOutboundBuffer waiting = context.channel().unsafe().outboundBuffer();
            return waiting == null ? 0 : waiting.totalPendingWriteBytes(); // null: closed
        }
    }

    /**
     * A reset, from here toward the socket: at once, not after the answers waiting to be written, and a plain close
     * would leave those answers in the kernel, sent to a client that reads nothing.
     */
    private static void cutOff(ChannelHandlerContext context) {
        context.channel().config().setOption(ChannelOption.SO_LINGER, 0);
        context.close();
    }

    @Override
    protected void decode(ChannelHandlerContext context, ByteBuf in, List<Object> out) throws Exception {
        if (headKept != null || !insideRequest && mustWait(context)) {
            hold(context); // nothing taken: the decoder stops here, and what is read waits until resume
            return;
        }
        int before = out.size();
        super.decode(context, in, out);
        for (int i = before; i < out.size(); i++) {
            Object message = out.get(i);
            if (message instanceof HttpRequest request) { // a head the decoder cannot read is one too, answered
                if (i == out.size() - 1 && read != answered && bodyToCome(request, in)) {
                    headKept = (HttpRequest) out.remove(i); // its body waits in the decoder's buffer
                    hold(context);
                    return;
                }
                read++;
                insideRequest = true;
            }
            if (message instanceof LastHttpContent) {
                insideRequest = false;
            }
        }
    }

    /**
     * What the end of the connection makes of a request begun and not read whole (a head cut short, a body that
     * stops), dropped while an answer before it is unwritten: handed to Vert.x, it is queued behind that answer, and
     * the close that follows threw in Vert.x as a body still coming did (above), the connection's place never given
     * back (a review found it, a head cut short behind a request the upstream held). The client has left; with
     * nothing before it, it is the request being handled, and Vert.x ends it as usual. A head cut short by a client
     * gone (not one that only shut its side, still answered) is dropped too, whatever came before it: no one is left
     * to read the 400 Vert.x would write, and that write to a closed connection sent Netty's warning of an exception
     * no one handled to the log (a review saw it about once in 4,000 such clients, on Redis).
     */
    @Override
    protected void decodeLast(ChannelHandlerContext context, ByteBuf in, List<Object> out) throws Exception {
        int before = out.size();
        super.decodeLast(context, in, out);
        boolean gone = !context.channel().isActive();
        for (int i = out.size() - 1; i >= before; i--) {
            if (read != answered || gone && out.get(i) instanceof HttpRequest head && head.decoderResult().isFailure()) {
                ReferenceCountUtil.release(out.remove(i));
            }
        }
    }

    @Override
    protected HttpMessage createMessage(String[] initialLine) {
        lengths = 0; // a request begins: its headers follow
        return super.createMessage(initialLine);
    }

    /** Netty reads each header's name with this, the only hook that sees every one before it merges them. */
    @Override
    protected AsciiString splitHeaderName(byte[] line, int start, int length) {
        AsciiString name = super.splitHeaderName(line, start, length);
        if (HttpHeaderNames.CONTENT_LENGTH.contentEqualsIgnoreCase(name)) {
            lengths++;
        }
        return name;
    }

    /** Netty asks this of every request once its headers are read, before it delimits the body: the hook to check. */
    @Override
    protected boolean isContentAlwaysEmpty(HttpMessage message) {
        HttpVersion version = message.protocolVersion();
        if (version != HttpVersion.HTTP_1_1 && version != HttpVersion.HTTP_1_0) {
            // the answer is in this server's version, not the one the client wrote (RFC 9110 §6.2; a review found
            // "HTTP/2.0 400" sent back)
            message.setProtocolVersion(HttpVersion.HTTP_1_1);
            if (version.majorVersion() == 2 && message instanceof HttpRequest request
                    && request.method().name().equals("PRI") && request.uri().equals("*")) {
                throw new Http2Refusal.Preface(); // HTTP/2 spoken at once (h2c with prior knowledge)
            }
            // Netty reads http/1.1, HTTP/1.00 or HTTP/01.0 as versions of their own, which Vert.x then calls none at
            // all (null), and the rules below would let Transfer-Encoding pass in a request that is 1.0 (a review
            // found it): the version is written as RFC 9112 writes it, or the request is refused
            throw new IllegalArgumentException("request line: HTTP version written otherwise than HTTP/1.1 or"
                    + " HTTP/1.0 (read as " + version.text() + ")");
        }
        if (lengths > 1) { // Netty refuses two in HTTP/1.1 itself, before this; in HTTP/1.0 it took the first
            throw new IllegalArgumentException("header Content-Length: given " + lengths + " times; a body is"
                    + " delimited one way");
        }
        if (message.headers().contains(HttpHeaderNames.TRANSFER_ENCODING)) { // else no list made: the common case
            List<String> codings = message.headers().getAll(HttpHeaderNames.TRANSFER_ENCODING);
            if (version == HttpVersion.HTTP_1_0) {
                throw new IllegalArgumentException("header Transfer-Encoding in an HTTP/1.0 request, which has no"
                        + " such framing");
            }
            // as sent, less what Netty strips around a value: "chunked" and a control byte is no coding Netty takes
            if (codings.size() != 1 || !codings.get(0).equalsIgnoreCase("chunked")) {
                throw new IllegalArgumentException("header Transfer-Encoding: \"" + String.join(", ", codings)
                        + "\": chunked alone is taken");
            }
            if (message.headers().contains(HttpHeaderNames.CONTENT_LENGTH)) {
                throw new IllegalArgumentException("headers Content-Length and Transfer-Encoding together: a body"
                        + " is delimited one way");
            }
        }
        return super.isContentAlwaysEmpty(message);
    }
}
