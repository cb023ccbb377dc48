package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The gRPC server that answers Envoy's rate limit calls ({@link RateLimitService}) on the configuration in force:
 * a reload of the file applies to the next call. Decisions never block its threads: the in-memory store answers
 * at once, and a Redis store's answer completes the call from the thread that receives it.
 *
 * <p>It also answers gRPC's health service ({@code grpc.health.v1.Health}), which Envoy's gRPC health checks and
 * Kubernetes' gRPC probes ask, for the server ({@code ""}) and for the rate limit service by name: {@code SERVING}
 * while it runs, {@code NOT_SERVING} from the moment it begins to shut down. A store that does not answer does not
 * make it {@code NOT_SERVING}: its calls are then decided by {@code on_store_failure}, which is what the
 * configuration asks for; were the service taken out of Envoy's cluster instead, Envoy's own
 * {@code failure_mode_deny} would decide, and with {@code on_store_failure: closed} open a gate that was meant to
 * close (and every server on one Redis would be taken out at once). {@code /healthz} and the metrics tell of the
 * store.
 */
public final class EnvoyRateLimitServer implements AutoCloseable {
    /**
     * gRPC's log of connections that fail, at WARNING and above only: every connection that does not speak gRPC
     * (an HTTP health check sent to this port, a port scanner, a TLS hello) logged 25 lines of stack trace at INFO,
     * found by trying it; Envoy's own rate limit service logs nothing of them at its default level. Such a client
     * is answered with an HTTP/2 GOAWAY either way. Held here, since java.util.logging keeps loggers weakly.
     */
    private static final Logger CONNECTIONS = quieted("io.grpc.netty.shaded.io.grpc.netty.NettyServerTransport.connections");

    private static Logger quieted(String name) {
        Logger logger = Logger.getLogger(name);
        logger.setLevel(Level.WARNING);
        return logger;
    }

    private final Server server;
    private final HealthStatusManager health;

    private EnvoyRateLimitServer(Server server, HealthStatusManager health) {
        this.server = server;
        this.health = health;
    }

    /** Listens on {@code host:port} (0: a free port). */
    public static EnvoyRateLimitServer start(LiveConfig live, String host, int port) throws IOException {
        HealthStatusManager health = new HealthStatusManager();
        health.setStatus(RateLimitServiceGrpc.SERVICE_NAME, ServingStatus.SERVING);
        return new EnvoyRateLimitServer(NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
                .directExecutor()
                .addService(new RateLimitService(live).definition())
                .addService(health.getHealthService())
                .build()
                .start(), health);
    }

    public int port() {
        return server.getPort();
    }

    @Override
    public void close() throws InterruptedException {
        health.enterTerminalState(); // watchers hear NOT_SERVING before the calls stop
        server.shutdown();
        if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
            server.shutdownNow();
        }
    }
}
