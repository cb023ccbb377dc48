package dev.sluice.server.envoy;

import dev.sluice.server.ClientConnections;

import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelFactory;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandler;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelInboundHandlerAdapter;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.IoHandlerFactory;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.ServerChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;

import java.time.Duration;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * The Netty transport under the gRPC server: what gRPC would choose itself (epoll where Linux has it, NIO elsewhere;
 * one accepting thread, two event loops a core, daemon threads), with three things added: {@link UnreadAnswers} first
 * in every connection's pipeline, no more connections than the process takes ({@link ClientConnections}: one past
 * them is closed as it is accepted), and bounds on the calls open and the messages they have begun
 * ({@link CallsHeld}). gRPC gives no hook into a connection's pipeline, so the listening channel carries one: it sees
 * each connection as it is accepted, before gRPC's own handlers are added behind it. Since gRPC then does not own the
 * event loops, {@link #close} ends them, after the server.
 */
final class GrpcTransport implements AutoCloseable {
    private final EventLoopGroup accepting;
    private final EventLoopGroup connections;
    private final ChannelFactory<ServerChannel> listening;
    private final CallsHeld calls = new CallsHeld();

    GrpcTransport(Duration sendTimeout, ClientConnections clients) {
        boolean epoll = Epoll.isAvailable();
        ThreadFactory acceptor = new DefaultThreadFactory("sluice-grpc-accept", true);
        ThreadFactory loop = new DefaultThreadFactory("sluice-grpc", true);
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.accepting = new MultiThreadIoEventLoopGroup(1, acceptor, io);
        this.connections = new MultiThreadIoEventLoopGroup(0, loop, io);
        ChannelHandler watch = new Watch(sendTimeout, clients, calls);
        this.listening = () -> {
            ServerChannel channel = epoll ? new EpollServerSocketChannel() : new NioServerSocketChannel();
            channel.pipeline().addLast(watch); // before the acceptor gRPC's bootstrap adds
            return channel;
        };
    }

    /** {@code builder}, set to run on this transport. */
    NettyServerBuilder apply(NettyServerBuilder builder) {
        return builder.channelFactory(listening).bossEventLoopGroup(accepting).workerEventLoopGroup(connections)
                .addStreamTracerFactory(calls);
    }

    /** Ends the event loops, waiting up to 5 s for their threads: a closed server leaves none behind. */
    @Override
    public void close() {
        accepting.shutdownGracefully(0, 0, TimeUnit.SECONDS);
        connections.shutdownGracefully(0, 0, TimeUnit.SECONDS);
        accepting.terminationFuture().awaitUninterruptibly(5, TimeUnit.SECONDS);
        connections.terminationFuture().awaitUninterruptibly(5, TimeUnit.SECONDS);
    }

    /** On the listening channel: puts an {@link UnreadAnswers} first in each connection accepted. */
    @ChannelHandler.Sharable
    private static final class Watch extends ChannelInboundHandlerAdapter {
        private final Duration sendTimeout;
        private final ClientConnections clients;
        private final CallsHeld calls;

        Watch(Duration sendTimeout, ClientConnections clients, CallsHeld calls) {
            this.sendTimeout = sendTimeout;
            this.clients = clients;
            this.calls = calls;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object accepted) {
            if (accepted instanceof Channel connection) {
                if (!clients.take(ClientConnections.Port.SERVICE)) {
                    connection.unsafe().closeForcibly(); // not yet registered with a loop: as gRPC's acceptor closes one it cannot
                    return;
                }
                connection.closeFuture().addListener(closed -> clients.leave());
                calls.connected(connection);
                connection.pipeline().addFirst(new UnreadAnswers(sendTimeout));
            }
            ctx.fireChannelRead(accepted);
        }
    }
}
