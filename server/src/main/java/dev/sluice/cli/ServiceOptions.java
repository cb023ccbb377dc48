package dev.sluice.cli;

import dev.sluice.server.Drains;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.http.EventLoops;
import dev.sluice.server.metrics.ServerMetrics;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** What {@code sluice serve} and {@code sluice gateway} share: the configuration, where to listen, how to stop. */
final class ServiceOptions {
    /** How often the configuration file is read again for changes. */
    static final Duration RELOAD_EVERY = Duration.ofSeconds(1);

    @Option(names = "--config", paramLabel = "FILE",
            description = "sluice.yaml (default: examples/sluice.yaml); reloaded when it changes")
    Path config;

    @Option(names = "--port", paramLabel = "N", description = "default 8080; 0 picks a free port")
    int port = 8080;

    @Option(names = "--host", paramLabel = "ADDRESS", description = "default 0.0.0.0 (every interface)")
    String host = "0.0.0.0";

    @Option(names = "--idle-timeout", paramLabel = "DURATION", description = "how long a client's HTTP connection may "
            + "carry no request before it is closed, as nginx's keepalive_timeout, and, on the API, how long a "
            + "request's body may take (default 60s, at least 1s; with serve --grpc-port, the gRPC port keeps its own 5m)")
    String idleTimeout = "60s";

    @Option(names = "--drain-timeout", paramLabel = "DURATION", description = "when asked to stop (SIGTERM), how long"
            + " the requests being handled may take to finish, no new connection taken meanwhile, as nginx's"
            + " worker_shutdown_timeout; requests still held for their turn then are answered 503, given a second more"
            + " (default 20s)")
    String drainTimeout = "20s";

    @Option(names = "--stop-delay", paramLabel = "DURATION", description = "when asked to stop (SIGTERM), how long to"
            + " go on serving everyone first, /healthz answering 503 (gRPC health NOT_SERVING), so that load balancers"
            + " and Kubernetes take the server out before it takes no new connections, as Traefik's"
            + " requestAcceptGraceTimeout (default 0s; the drain follows, within --drain-timeout)")
    String stopDelay = "0s";

    @Option(names = "--max-connections", paramLabel = "N", description = "the most client connections open at once,"
            + " over every port; one more is closed as it is accepted, as nginx's worker_connections (default: half the"
            + " file descriptors the process may open, less 256); the gateway's clients leave a sixteenth, at least 1 and at most 64,"
            + " to the other ports")
    Integer maxConnections;

    /** {@code --idle-timeout} in milliseconds: at least a second, since the watch looks every quarter of it. */
    long idleTimeoutMs() throws BadInput {
        return durationMs("--idle-timeout", idleTimeout, 1_000);
    }

    /** The duration {@code value} of {@code option} in milliseconds, at least {@code leastMs}, or why not. */
    static long durationMs(String option, String value, long leastMs) throws BadInput {
        long nanos;
        try {
            nanos = dev.sluice.DurationFormat.parseNanos(value);
        } catch (IllegalArgumentException e) { // too long, no unit: said as such (a review found "at least 1s" said)
            throw new BadInput(option + ": " + e.getMessage());
        }
        if (nanos < leastMs * 1_000_000) {
            throw new BadInput(option + ": expected a duration of at least "
                    + dev.sluice.DurationFormat.format(leastMs * 1_000_000) + " such as 30s, got \"" + value + "\"");
        }
        return nanos / 1_000_000;
    }

    /**
     * Where a client on this machine reaches a server listening on {@code host}: {@code localhost} when it
     * listens on every interface, else the address itself (an IPv6 one in brackets, as a URL writes it).
     */
    static String reachableAt(String host) {
        if (host.equals("0.0.0.0") || host.equals("::") || host.equals("[::]")) {
            return "localhost";
        }
        return host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
    }

    static void checkPort(String option, int port) throws BadInput {
        if (port < 0 || port > 65535) {
            throw new BadInput(option + ": expected 0 to 65535, got " + port);
        }
    }

    Path file() throws BadInput {
        return configFile(config);
    }

    /** The file {@code --config} names, or {@link #defaultConfig} without one; an empty name is refused, naming it. */
    static Path configFile(Path config) throws BadInput {
        if (config != null && config.toString().isEmpty()) { // Path.of(""): the directory, read as a file
            throw new BadInput("--config: empty; name the configuration file");
        }
        return config != null ? config : defaultConfig();
    }

    /**
     * Loads the configuration and keeps it up to date; a bad file, an unreachable store or a bad number of event
     * loops is bad input.
     */
    LiveConfig load() throws BadInput {
        checkPort("--port", port);
        if (maxConnections != null && maxConnections < 1) {
            throw new BadInput("--max-connections: expected at least 1, got " + maxConnections);
        }
        try {
            EventLoops.count();
        } catch (IllegalArgumentException e) {
            throw new BadInput(e.getMessage());
        }
        LiveConfig live;
        try {
            live = LiveConfig.load(file(), new ServerMetrics());
        } catch (ConfigException e) {
            throw new BadInput(e.getMessage());
        }
        if (maxConnections != null) {
            live.connections().mostAsked(maxConnections, System.getLogger("sluice"));
        }
        live.watch(RELOAD_EVERY);
        return live;
    }

    /** A listener's start, which may fail to listen. */
    @FunctionalInterface
    interface Listening<T> {
        T start() throws Exception;
    }

    /**
     * Starts a listener; one that cannot listen closes what already runs, in the order given, and is a
     * {@link BadInput} that names the option at fault ({@link #cannotListen}).
     */
    <T> T listen(String option, int port, Listening<T> listening, AutoCloseable... running) throws BadInput {
        try {
            return listening.start();
        } catch (Exception e) {
            for (AutoCloseable started : running) {
                try {
                    started.close();
                } catch (Exception closing) {
                    e.addSuppressed(closing);
                }
            }
            throw cannotListen(option, port, e);
        }
    }

    /** Listening failed: the message names the option at fault, the port's, or the host's when it is the address. */
    BadInput cannotListen(String option, int port, Exception e) {
        if (host.isBlank()) {
            return new BadInput("--host: empty; name an address of this machine, or 0.0.0.0 for every interface");
        }
        Throwable root = e;
        boolean unknownHost = false; // anywhere in the chain: Netty's resolver wraps its NXDOMAIN (a review found
        // 999.1.1.1 blamed on --port)
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            unknownHost |= cause instanceof java.net.UnknownHostException;
            root = cause;
        }
        if (unknownHost || String.valueOf(root.getMessage()).contains("assign requested address")) {
            return new BadInput("--host " + host + ": not an address of this machine (" + root.getMessage() + ")");
        }
        return new BadInput(option + " " + port + ": cannot listen on " + host + ": " + root.getMessage());
    }

    /** {@code --stop-delay} in nanoseconds. */
    long stopDelayNanos() throws BadInput {
        return TimeUnit.MILLISECONDS.toNanos(durationMs("--stop-delay", stopDelay, 0));
    }

    /** {@code --drain-timeout} in nanoseconds. */
    long drainTimeoutNanos() throws BadInput {
        return TimeUnit.MILLISECONDS.toNanos(durationMs("--drain-timeout", drainTimeout, 0));
    }

    /**
     * Blocks until the process is asked to stop; then has every one of {@code running} that {@link Drains} say so in
     * its health checks and go on serving for {@code stopDelayNanos}; then stops them all at once, lets them finish
     * what they are handling, all within {@code drainNanos}, and closes them all in order.
     */
    static void runUntilStopped(List<AutoCloseable> running, long stopDelayNanos, long drainNanos,
                                java.io.PrintWriter out) throws InterruptedException {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (stopDelayNanos > 0) {
                boolean told = false;
                for (AutoCloseable one : running) {
                    if (one instanceof Drains draining) {
                        told |= draining.announceStopping();
                    }
                }
                // on the output, as the lines of the start
                out.println("sluice: asked to stop: serving everyone for " + dev.sluice.DurationFormat.format(stopDelayNanos)
                        + " more" + (told ? " (health checks answer that it is stopping: /healthz 503)" : "")
                        + "; then no new connection, and up to " + dev.sluice.DurationFormat.format(drainNanos)
                        + " for the requests under way");
                out.flush();
                try {
                    TimeUnit.NANOSECONDS.sleep(stopDelayNanos);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt(); // drained at once, below
                }
            } else {
                out.println("sluice: asked to stop: no new connection; up to "
                        + dev.sluice.DurationFormat.format(drainNanos) + " for the requests under way");
                out.flush();
            }
            long deadline = System.nanoTime() + drainNanos;
            for (AutoCloseable one : running) {
                if (one instanceof Drains draining) {
                    draining.startDraining();
                }
            }
            for (AutoCloseable one : running) {
                if (one instanceof Drains draining) {
                    try {
                        draining.awaitDrained(deadline);
                    } catch (InterruptedException e) {
                        break; // closed at once, below
                    } catch (RuntimeException e) {
                        // closed below all the same
                    }
                }
            }
            for (AutoCloseable one : running) {
                try {
                    one.close();
                } catch (Exception e) {
                    // shutting down anyway
                }
            }
            LastingLogManager.closeAll(); // nothing more to log
            stopped.countDown();
        }));
        stopped.await();
    }

    /**
     * examples/sluice.yaml of the installation ({@code SLUICE_HOME}, set by bin/sluice), else, with no SLUICE_HOME, of
     * the current directory. A SLUICE_HOME without the file is told by its path, not passed over for the current
     * directory: a review found a wrong SLUICE_HOME told only as "examples/sluice.yaml: no such file".
     */
    static Path defaultConfig() {
        String home = System.getenv("SLUICE_HOME");
        return home == null || home.isEmpty() ? Path.of("examples", "sluice.yaml") : Path.of(home, "examples", "sluice.yaml");
    }
}
