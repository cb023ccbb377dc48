package dev.sluice.server.envoy;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelDuplexHandler;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelOption;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2ConnectionHandler;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2Exception;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2RemoteFlowController;
import io.grpc.netty.shaded.io.netty.util.concurrent.ScheduledFuture;

import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Watches one gRPC connection for a client that does not take its answers, in either of the two ways a client can
 * leave them waiting, and cuts off (closes with a reset) one that has left an answer waiting for the send timeout,
 * as nginx's {@code send_timeout} and the gateway do:
 *
 * <ul>
 *   <li><b>Unread</b>: the client reads nothing, the socket's buffers fill and Netty's outgoing buffer passes its
 *   high mark (the channel is not writable). The connection is then read no further, and read again as soon as the
 *   answers drain; it is cut off once they have waited the send timeout.</li>
 *   <li><b>Held for the client's window</b>: the client reads, but never gives HTTP/2 the window to send an answer
 *   in, so the answer waits in HTTP/2's queue and its call stays open. Every send timeout the calls whose answers
 *   wait so are noted; a call noted at two checks in a row (its answer has waited a send timeout or more, up to two)
 *   has the connection cut off.</li>
 * </ul>
 *
 * <p>Why: gRPC reads every call a connection sends and writes each answer whatever the socket's state. A client
 * that sent calls as fast as it could and read nothing (found by attacking the port) had the server read 122,000
 * calls in a few seconds and keep each one, its answer waiting, about 3 KB of heap and direct memory a call, until
 * the direct memory ran out and the connection's event loop stalled for good, in the JVM's wait for memory, with
 * every other connection of that loop. Not reading is what makes the client's own writes wait instead: what one
 * connection holds is then what was read before its answers filled the buffers (the answers of one read, at most).
 * A client that never opens its window holds at most a thousand calls (HTTP/2's bound), 3 MB; cutting it off
 * after the send timeout keeps many such connections from adding up.
 *
 * <p>An honest client is never slowed by this: Netty's outgoing buffer only fills once the kernel's send buffer
 * (hundreds of kilobytes to megabytes) is full, which only a client reading nothing lets happen, and an answer (a
 * few hundred bytes; 300 KB for a call of 10,000 descriptors) that waits a minute for a window is not being read.
 * HTTP/2's flow control cannot wedge the reading either: answers held back for the client's window stay in HTTP/2's
 * queue, not in the outgoing buffer, and leave the connection writable and read.
 *
 * <p>Not reading takes two things: the channel stops reading by itself ({@code autoRead} off), and the reads that
 * Netty's HTTP/2 handler asks for are held back until the answers drain. That handler asks for one after every read
 * when {@code autoRead} is off, on purpose ("ensure we never stale the HTTP/2 channel": HTTP/2's flow control is to
 * bound what a connection sends, not the socket); left to it, the connection was read on as before (found by the
 * test).
 *
 * <p>It sits first in the connection's pipeline, nearest the socket ({@link GrpcTransport} puts it there as the
 * connection is accepted), so every read asked for passes through it, and a close it makes passes no other
 * handler; it runs on the connection's event loop, and passes every event on.
 */
final class UnreadAnswers extends ChannelDuplexHandler {
    private final Duration sendTimeout;
    /** The cut-off of a connection not writable, while it is not. */
    private ScheduledFuture<?> unwritable;
    /** The next look at the answers HTTP/2 holds for the client's window. */
    private ScheduledFuture<?> nextLook;
    /** The calls whose answers HTTP/2 held at the last look. */
    private Set<Integer> held = Set.of();

    UnreadAnswers(Duration sendTimeout) {
        this.sendTimeout = sendTimeout;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
        lookLater(ctx);
        super.channelActive(ctx);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        Channel channel = ctx.channel();
        if (channel.isWritable()) {
            cancel(unwritable);
            unwritable = null;
            channel.config().setAutoRead(true); // which asks for a read, through read() below
        } else {
            channel.config().setAutoRead(false);
            if (unwritable == null) {
                unwritable = ctx.executor().schedule(() -> {
                    unwritable = null; // a notice of writability that came late finds no timer to cancel, and the next one arms one
                    if (!channel.isWritable()) {
                        cutOff(ctx);
                    }
                }, sendTimeout.toNanos(), TimeUnit.NANOSECONDS);
            }
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void read(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable()) {
            ctx.read();
        } // else held back: turning autoRead on again, once writable, asks for the read
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        cancel(unwritable);
        cancel(nextLook);
        super.channelInactive(ctx);
    }

    private void lookLater(ChannelHandlerContext ctx) {
        nextLook = ctx.executor().schedule(() -> look(ctx), sendTimeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** Notes the calls whose answers HTTP/2 holds; cuts the connection off if one of them was held at the last look. */
    private void look(ChannelHandlerContext ctx) {
        Http2ConnectionHandler http2 = ctx.pipeline().get(Http2ConnectionHandler.class);
        if (http2 == null) { // not yet HTTP/2, or no longer
            lookLater(ctx);
            return;
        }
        Http2RemoteFlowController window = http2.connection().remote().flowController();
        Set<Integer> now = new HashSet<>();
        try {
            http2.connection().forEachActiveStream(stream -> {
                if (window.hasFlowControlled(stream)) {
                    now.add(stream.id());
                }
                return true;
            });
        } catch (Http2Exception e) {
            throw new IllegalStateException(e); // the visitor throws nothing
        }
        boolean stillHeld = now.stream().anyMatch(held::contains);
        held = now;
        if (stillHeld) {
            cutOff(ctx);
        } else {
            lookLater(ctx);
        }
    }

    private static void cutOff(ChannelHandlerContext ctx) {
        cutOff(ctx.channel());
    }

    /**
     * Cuts a gRPC connection off with a reset: a plain close would leave the unread answers in the kernel, sent to no
     * one. And closed from the first handler of its pipeline, nearest the socket (this one, put first as the
     * connection is accepted): gRPC's handler makes a close that passes it a graceful one, a GOAWAY that waits for
     * the calls open to end, and these never would. On the connection's event loop.
     */
    static void cutOff(Channel connection) {
        connection.config().setOption(ChannelOption.SO_LINGER, 0);
        connection.pipeline().firstContext().close();
    }

    private static void cancel(ScheduledFuture<?> task) {
        if (task != null) {
            task.cancel(false);
        }
    }
}
