package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * The gRPC server that answers Envoy's rate limit calls ({@link RateLimitService}) on the configuration in force:
 * a reload of the file applies to the next call. Decisions never block its threads: the in-memory store answers
 * at once, and a Redis store's answer completes the call from the thread that receives it.
 */
public final class EnvoyRateLimitServer implements AutoCloseable {
    private final Server server;

    private EnvoyRateLimitServer(Server server) {
        this.server = server;
    }

    /** Listens on {@code host:port} (0: a free port). */
    public static EnvoyRateLimitServer start(LiveConfig live, String host, int port) throws IOException {
        return new EnvoyRateLimitServer(NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
                .directExecutor()
                .addService(new RateLimitService(live))
                .build()
                .start());
    }

    public int port() {
        return server.getPort();
    }

    @Override
    public void close() throws InterruptedException {
        server.shutdown();
        if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
            server.shutdownNow();
        }
    }
}
