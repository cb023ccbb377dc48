package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The gRPC server that answers Envoy's rate limit calls ({@link RateLimitService}) on the configuration in force:
 * a reload of the file applies to the next call. Decisions never block its threads: the in-memory store answers
 * at once, and a Redis store's answer completes the call from the thread that receives it.
 *
 * <p>It also answers gRPC's health service ({@code grpc.health.v1.Health}), which Envoy's gRPC health checks and
 * Kubernetes' gRPC probes ask, for the server ({@code ""}) and for the rate limit service by name: {@code SERVING},
 * or {@code NOT_SERVING} while the store does not answer (as {@code /healthz} answers 503), looked at every
 * {@link #HEALTH_PERIOD_MS} ms; {@code NOT_SERVING} for good once the server closes.
 */
public final class EnvoyRateLimitServer implements AutoCloseable {
    static final long HEALTH_PERIOD_MS = 1_000;

    private final Server server;
    private final HealthStatusManager health;
    private final ScheduledExecutorService looks;

    private EnvoyRateLimitServer(Server server, HealthStatusManager health, ScheduledExecutorService looks) {
        this.server = server;
        this.health = health;
        this.looks = looks;
    }

    /** Listens on {@code host:port} (0: a free port). */
    public static EnvoyRateLimitServer start(LiveConfig live, String host, int port) throws IOException {
        HealthStatusManager health = new HealthStatusManager();
        Runnable look = () -> {
            ServingStatus status = live.storeHealthy() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
            health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, status);
            health.setStatus(RateLimitServiceGrpc.SERVICE_NAME, status);
        };
        look.run();
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
                .directExecutor()
                .addService(new RateLimitService(live))
                .addService(health.getHealthService())
                .build()
                .start();
        ScheduledExecutorService looks = Executors.newSingleThreadScheduledExecutor(task -> {
            Thread thread = new Thread(task, "sluice-grpc-health");
            thread.setDaemon(true);
            return thread;
        });
        looks.scheduleWithFixedDelay(look, HEALTH_PERIOD_MS, HEALTH_PERIOD_MS, TimeUnit.MILLISECONDS);
        return new EnvoyRateLimitServer(server, health, looks);
    }

    public int port() {
        return server.getPort();
    }

    @Override
    public void close() throws InterruptedException {
        looks.shutdownNow();
        health.enterTerminalState();
        server.shutdown();
        if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
            server.shutdownNow();
        }
    }
}
