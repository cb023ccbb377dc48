package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
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
public final class EnvoyRateLimitServer implements AutoCloseable, dev.sluice.server.Drains {
    /**
     * gRPC's log of connections that fail, at WARNING and above only: every connection that does not speak gRPC
     * (an HTTP health check sent to this port, a port scanner, a TLS hello) logged 25 lines of stack trace at INFO,
     * found by trying it; Envoy's own rate limit service logs nothing of them at its default level. Such a client
     * is answered with an HTTP/2 GOAWAY either way. Held here, since java.util.logging keeps loggers weakly.
     */
    private static final Logger CONNECTIONS = quieted("io.grpc.netty.shaded.io.grpc.netty.NettyServerTransport.connections");
    /**
     * gRPC's log of a message it could not read (over its size, {@link #MOST_BYTES_A_MESSAGE}, or marked gzip and not), at WARNING and above only: each
     * logged a 4 KB stack trace, and a client sending 14-byte streams that claim 5 MB wrote a gigabyte of log in 12 s
     * (found by attacking the port). The call itself is ended with a reset either way, as before.
     */
    private static final Logger MESSAGES = quieted("io.grpc.netty.shaded.io.grpc.netty.NettyServerStream");
    /**
     * gRPC's log of its connections' HTTP/2 handling, less its "Stream Error" warnings: each is a 30-line stack trace
     * for one call a client's frames broke (a WINDOW_UPDATE of 0, a call past the thousand, answers left unsent on a
     * connection cut off for leaving them unread, {@link UnreadAnswers}), and a client sending such frames wrote
     * 15,000 of them in two seconds (found by the tests). The call is reset either way, and a client that makes the
     * server reset its calls too fast has its connection ended ({@link #MOST_RESETS_A_SECOND}); Envoy's own service
     * logs none of these at its default level. The handler's other warnings are kept.
     */
    private static final Logger STREAMS = withoutStreamErrors("io.grpc.netty.shaded.io.grpc.netty.NettyServerHandler");
    /**
     * The most calls one connection may have open at once (HTTP/2's {@code SETTINGS_MAX_CONCURRENT_STREAMS}); a client
     * wanting more waits for one to end, or opens another connection, as Envoy does. gRPC's default is unbounded: one
     * connection opened a million calls that sent their headers and nothing else, 2 KB of heap each, and a server of
     * 512 MB ran out of memory (found by attacking the port). A thousand is far more than Envoy keeps in flight on
     * a connection: a call is decided in microseconds. The bound holds from the connection's start, whether or not
     * the client has acknowledged the SETTINGS that carry it (gRPC's Netty applies it at once since gRPC 1.85; on
     * 1.62 a client that never acknowledged opened 192,000 calls): a call past it is refused with
     * {@code REFUSED_STREAM}, which a client may send again, and one that sends on a refused call regardless has its
     * connection ended ({@code PROTOCOL_ERROR}: Netty takes such a frame for one on a call that never was). An
     * honest client never meets either before it has the SETTINGS: nghttp2 (Envoy's HTTP/2 library of old), Go's
     * and Rust's h2 open at most 100 streams until then. {@code ConnectionBoundsTest} pins both.
     */
    static final int MOST_CALLS_PER_CONNECTION = 1_000;
    /**
     * The most streams a client may reset in a second on one connection before the connection is ended (HTTP/2
     * "rapid reset", CVE-2023-44487): gRPC does not bound it unless told, and one connection opened and reset 543,000
     * streams a second, 137,000 of them decided, holding a core (found by attacking the port). Since gRPC 1.75 the
     * resets the server sends count too: a client could otherwise have the server reset its calls for it, by a frame
     * that calls for one ("MadeYouReset", CVE-2025-8671: 30,000 calls, each decided, then reset, went unbounded on
     * gRPC 1.62). Envoy resets a call when its own timeout passes; ten thousand a second on one connection is far
     * beyond that.
     */
    static final int MOST_RESETS_A_SECOND = 10_000;
    /**
     * How long a connection with no call open is kept before it is ended, with a GOAWAY (gRPC's
     * {@code maxConnectionIdle}). gRPC keeps one for ever by default: a client that opened connections and sent
     * nothing, or the HTTP/2 preface alone, held about 15 KB of heap and a file descriptor each, with no bound, until
     * descriptors ran out and Envoy could not connect (found by attacking the port). Envoy opens a connection
     * again when it needs one; five minutes idle is far longer than its traffic leaves a connection unused.
     */
    static final Duration IDLE_CONNECTION = Duration.ofMinutes(5);
    /**
     * The largest message a call may send: a review found gRPC's 4 MB default let a thousand calls of a connection,
     * each sending all of such a message but its last byte, hold 4 GB (gRPC keeps what a message has sent so far, and
     * opens the window for more). Ten thousand descriptors, the most a call may carry, take about 300 KB.
     */
    static final int MOST_BYTES_A_MESSAGE = 1 << 20;
    /**
     * How long a connection lives before it is asked to go (a GOAWAY: Envoy opens another), and how long its calls
     * then have to end before it is closed: so no call, a message sent but its last byte, say, is held for ever
     * (a review found nothing ending one). gRPC keeps connections for ever by default.
     */
    static final Duration CONNECTION_AGE = Duration.ofHours(1);
    static final Duration CONNECTION_AGE_GRACE = Duration.ofMinutes(1);
    /**
     * The most often a client may ping (HTTP/2 PING), with or without calls open: Envoy's {@code connection_keepalive}
     * pings every so many seconds, and gRPC's defaults (5 minutes with calls, none without) ended such connections
     * with {@code too_many_pings} (a review).
     */
    static final Duration PINGS_AT_MOST_EVERY = Duration.ofSeconds(10);
    /**
     * How long a connection's answers may wait unread, or held for a window its client does not open, before it is
     * cut off ({@link UnreadAnswers}); while they wait unread it is read no further. nginx's {@code send_timeout}
     * default, as the gateway's.
     */
    static final Duration SEND_TIMEOUT = Duration.ofSeconds(60);

    private static Logger quieted(String name) {
        Logger logger = Logger.getLogger(name);
        logger.setLevel(Level.WARNING);
        return logger;
    }

    private static Logger withoutStreamErrors(String name) {
        Logger logger = Logger.getLogger(name);
        logger.setFilter(record -> !"Stream Error".equals(record.getMessage()));
        return logger;
    }

    private final Server server;
    private final HealthStatusManager health;
    private final HealthWatches watches;
    private final GrpcTransport transport;
    private final RateLimitService service;
    /** Whether it has stopped taking calls (drained, or closing); guarded by this. */
    private boolean stopping;

    private EnvoyRateLimitServer(Server server, HealthStatusManager health, HealthWatches watches,
                                 GrpcTransport transport, RateLimitService service) {
        this.server = server;
        this.health = health;
        this.watches = watches;
        this.transport = transport;
        this.service = service;
    }

    /** Listens on {@code host:port} (0: a free port). */
    public static EnvoyRateLimitServer start(LiveConfig live, String host, int port) throws IOException {
        return start(live, host, port, IDLE_CONNECTION, SEND_TIMEOUT);
    }

    /**
     * {@link #start(LiveConfig, String, int)}, ending connections idle for {@code idle} and those whose answers wait
     * unread for {@code sendTimeout} (tests wait less).
     */
    static EnvoyRateLimitServer start(LiveConfig live, String host, int port, Duration idle, Duration sendTimeout)
            throws IOException {
        HealthStatusManager health = new HealthStatusManager();
        health.setStatus(RateLimitServiceGrpc.SERVICE_NAME, ServingStatus.SERVING);
        HealthWatches watches = new HealthWatches();
        GrpcTransport transport = new GrpcTransport(sendTimeout, live.connections());
        RateLimitService service = new RateLimitService(live);
        try {
            return new EnvoyRateLimitServer(transport.apply(NettyServerBuilder.forAddress(new InetSocketAddress(host, port)))
                    .directExecutor()
                    .maxConcurrentCallsPerConnection(MOST_CALLS_PER_CONNECTION)
                    .maxRstFramesPerWindow(MOST_RESETS_A_SECOND, 1)
                    .maxConnectionIdle(idle.toNanos(), TimeUnit.NANOSECONDS)
                    .maxInboundMessageSize(MOST_BYTES_A_MESSAGE)
                    .maxConnectionAge(CONNECTION_AGE.toNanos(), TimeUnit.NANOSECONDS)
                    .maxConnectionAgeGrace(CONNECTION_AGE_GRACE.toNanos(), TimeUnit.NANOSECONDS)
                    .permitKeepAliveTime(PINGS_AT_MOST_EVERY.toNanos(), TimeUnit.NANOSECONDS)
                    .permitKeepAliveWithoutCalls(true)
                    .addService(service.definition())
                    .addService(ServerInterceptors.intercept(health.getHealthService(), watches))
                    .build()
                    .start(), health, watches, transport, service);
        } catch (IOException | RuntimeException e) {
            service.close();
            transport.close(); // the port was taken, say: its threads would otherwise outlive the failure
            throw e;
        }
    }

    public int port() {
        return server.getPort();
    }

    /** gRPC's health service answers {@code NOT_SERVING} from now on (Envoy's health checks take it out); calls go on. */
    @Override
    public boolean announceStopping() {
        health.setStatus(RateLimitServiceGrpc.SERVICE_NAME, ServingStatus.NOT_SERVING);
        health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, ServingStatus.NOT_SERVING);
        return true;
    }

    /**
     * Stops as the process is asked to: gRPC's graceful shutdown (a GOAWAY: Envoy opens its next calls elsewhere),
     * the calls under way answered.
     */
    @Override
    public void startDraining() {
        stopTakingCalls();
    }

    /** Waits for the calls under way until {@code deadlineNanos}; {@link #close} cuts what is left at once. */
    @Override
    public void awaitDrained(long deadlineNanos) throws InterruptedException {
        server.awaitTermination(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    private synchronized void stopTakingCalls() {
        if (stopping) {
            return;
        }
        stopping = true;
        health.enterTerminalState(); // watchers hear NOT_SERVING before the calls stop
        server.shutdown();
        watches.endAll(); // streams only their clients end: left open, each held the wait below (HealthWatches)
    }

    @Override
    public void close() throws InterruptedException {
        boolean drained;
        synchronized (this) {
            drained = stopping; // its calls have had their time: what is left is cut at once
        }
        stopTakingCalls();
        try {
            if (!server.awaitTermination(drained ? 0 : 5, TimeUnit.SECONDS)) {
                server.shutdownNow();
                server.awaitTermination(5, TimeUnit.SECONDS);
            }
        } finally {
            service.close();
            transport.close();
        }
    }
}
