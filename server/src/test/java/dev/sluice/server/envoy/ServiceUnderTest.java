package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Envoy's rate limit service on a free port of 127.0.0.1, serving {@code live}, and a channel of grpc-java's own to
 * it, a connection of its own, as Envoy's would be. Closing it closes both (not {@code live}).
 */
record ServiceUnderTest(EnvoyRateLimitServer server, ManagedChannel channel) implements AutoCloseable {
    static ServiceUnderTest start(LiveConfig live) throws IOException {
        return start(live, EnvoyRateLimitServer.IDLE_CONNECTION, EnvoyRateLimitServer.SEND_TIMEOUT);
    }

    /** With its bounds on idle connections and unread answers set (tests wait less). */
    static ServiceUnderTest start(LiveConfig live, Duration idle, Duration sendTimeout) throws IOException {
        EnvoyRateLimitServer server = EnvoyRateLimitServer.start(live, "127.0.0.1", 0, idle, sendTimeout);
        return new ServiceUnderTest(server, NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build());
    }

    int port() {
        return server.port();
    }

    /** The channel's stub, each call bounded by 10 s. */
    RateLimitServiceGrpc.RateLimitServiceBlockingStub envoy() {
        return RateLimitServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws InterruptedException {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        server.close();
    }
}
