package dev.sluice.server.envoy;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelDuplexHandler;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelOption;
import io.grpc.netty.shaded.io.netty.util.concurrent.ScheduledFuture;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Watches one gRPC connection for a client that does not read its answers: while the answers wait to be written
 * (the socket's buffers are full and Netty's outgoing buffer is past its high mark, so the channel is not writable),
 * the connection is read no further; it is read again as soon as they drain; and one whose answers have waited for
 * the send timeout is cut off (closed with a reset, as nginx's {@code send_timeout} and the gateway end theirs).
 *
 * <p>Why: gRPC reads every call a connection sends and writes each answer whatever the socket's state. A client
 * that sent calls as fast as it could and read nothing (found by attacking the port) had the server read 122,000
 * calls in a few seconds and keep each one, its answer waiting, about 3 KB of heap and direct memory a call, until
 * the direct memory ran out and the connection's event loop stalled for good, in the JVM's wait for memory, with
 * every other connection of that loop. Not reading is what makes the client's own writes wait instead: what one
 * connection holds is then what was read before its answers filled the buffers (the answers of one read, at most).
 *
 * <p>An honest client is never slowed by this: Netty's outgoing buffer only fills once the kernel's send buffer
 * (hundreds of kilobytes to megabytes) is full, which only a client reading nothing lets happen. HTTP/2's own flow
 * control cannot wedge it either: answers held back for the client's window stay in HTTP/2's queue, not in the
 * outgoing buffer, and leave the connection writable and read.
 *
 * <p>Not reading takes two things: the channel stops reading by itself ({@code autoRead} off), and the reads that
 * Netty's HTTP/2 handler asks for are held back until the answers drain. That handler asks for one after every read
 * when {@code autoRead} is off, on purpose ("ensure we never stale the HTTP/2 channel": HTTP/2's flow control is to
 * bound what a connection sends, not the socket); left to it, the connection was read on as before (found by the
 * test).
 *
 * <p>It sits first in the connection's pipeline, nearest the socket ({@link GrpcTransport} puts it there as the
 * connection is accepted), so every read asked for passes through it; it runs on the connection's event loop, and
 * passes every event on.
 */
final class UnreadAnswers extends ChannelDuplexHandler {
    private final Duration sendTimeout;
    private ScheduledFuture<?> cutOff;

    UnreadAnswers(Duration sendTimeout) {
        this.sendTimeout = sendTimeout;
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        Channel channel = ctx.channel();
        if (channel.isWritable()) {
            cancelCutOff();
            channel.config().setAutoRead(true); // which asks for a read, through read() below
        } else {
            channel.config().setAutoRead(false);
            if (cutOff == null) {
                cutOff = ctx.executor().schedule(() -> {
                    if (!channel.isWritable()) {
                        // a reset: a plain close would leave the unread answers in the kernel, sent to no one; and
                        // closed from here, nearest the socket, since gRPC's handler makes a close that passes it a
                        // graceful one, waiting for the calls open to end, which these never would
                        channel.config().setOption(ChannelOption.SO_LINGER, 0);
                        ctx.close();
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
        cancelCutOff();
        super.channelInactive(ctx);
    }

    private void cancelCutOff() {
        if (cutOff != null) {
            cutOff.cancel(false);
            cutOff = null;
        }
    }
}
