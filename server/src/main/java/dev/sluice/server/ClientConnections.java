package dev.sluice.server;

import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * The client connections a server process holds open, over its gateway, API and gRPC ports together, and the most it
 * takes at once ({@code --max-connections}): one more is closed as soon as it is accepted, and counted.
 *
 * <p>Why: each connection is a file descriptor, and the process has a fixed number of them. A client that opened
 * 20,000 idle connections (each let go after the idle timeout, and opened again) used up the process's 20,000, and
 * then nothing could be opened: no connection to the upstream or to Redis, no configuration file read for a reload,
 * and every new client's connection failed in the kernel's backlog (a review found it). nginx bounds its
 * connections the same way ({@code worker_connections}, 512 a worker by default) and closes what comes past them.
 *
 * <p>The default leaves room for what the process opens itself: half the descriptors it may open, less 256 (the
 * gateway opens a connection to the upstream for each request in flight, at most one a client connection; Redis,
 * the JVM's own files and the configuration take the 256). With the common limits: 384 connections under 1,024
 * descriptors, 32,640 under 65,536, 524,160 under 1,048,576.
 *
 * <p>The gateway's clients may not take the last places ({@link #kept()}: a sixteenth, at least one and at most
 * {@value #MOST_KEPT}): those are kept for the ports the operator's own tools reach, the API (the gateway's admin port,
 * with {@code /metrics} and {@code /healthz}) and Envoy's gRPC port. Before, one budget served every port, and clients
 * holding the gateway's connections kept the scrapes out too, at the moment they were needed most.
 */
public final class ClientConnections {
    /** Descriptors kept for the process's own use: Redis, the JVM's files, the configuration, the listening sockets. */
    static final int KEPT_FOR_THE_PROCESS = 256;
    /** The fewest the default allows, whatever the limit says. */
    static final int FEWEST = 16;

    /** The most places kept from the gateway's clients, whatever the most connections. */
    static final int MOST_KEPT = 64;

    /** The port a connection comes in by. */
    public enum Port {
        /** The gateway's, open to the world: its clients may take every place but those {@link #kept()}. */
        GATEWAY,
        /** The API's (the gateway's admin port) and Envoy's gRPC port: their clients may take every place. */
        SERVICE
    }

    /** The most bytes of answers waiting for the socket over every connection, unless told otherwise. */
    public static final long MOST_UNSENT_ANSWERS = 64L << 20;

    private volatile int most;
    private final AtomicInteger open = new AtomicInteger();
    private final LongAdder refused = new LongAdder();
    private volatile long mostUnsent = MOST_UNSENT_ANSWERS;
    /**
     * Bytes of answers waiting for the socket, over every connection (as each last counted its own): added to by every
     * event loop at each write, read only when one connection has more than 64 KB waiting, so an adder, not one
     * contended field.
     */
    private final LongAdder unsent = new LongAdder();

    /** At most {@link #defaultMost()} connections, until told otherwise. */
    public ClientConnections() {
        this(defaultMost());
    }

    ClientConnections(int most) {
        this.most = most;
    }

    /** Half the file descriptors this process may open, less {@value #KEPT_FOR_THE_PROCESS}; at least {@value #FEWEST}. */
    public static int defaultMost() {
        return (int) Math.min(Integer.MAX_VALUE, Math.max(FEWEST, (descriptors() - KEPT_FOR_THE_PROCESS) / 2));
    }

    /** The file descriptors this process may open ({@code ulimit -n}); 20,000 where the JVM cannot tell (not a Unix). */
    public static long descriptors() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
            return unix.getMaxFileDescriptorCount();
        }
        return 20_000;
    }

    /**
     * Sets the most connections as {@code --max-connections} asks, with a warning when the process cannot open that
     * many and still have room for its own ({@value #KEPT_FOR_THE_PROCESS}): then it could run out of descriptors for
     * the upstream, Redis or its configuration before the bound is reached. nginx warns so of a worker_connections
     * past the open file limit (a review found the bound taken silently).
     */
    public void mostAsked(int connections, System.Logger log) {
        most(connections);
        long descriptors = descriptors();
        if (connections > descriptors - KEPT_FOR_THE_PROCESS) {
            log.log(System.Logger.Level.WARNING, "--max-connections " + connections + " is more than this process can"
                    + " hold: it may open " + descriptors + " file descriptors (ulimit -n), and keeps "
                    + KEPT_FOR_THE_PROCESS + " for its own; raise the limit, or give at most "
                    + Math.max(1, descriptors - KEPT_FOR_THE_PROCESS));
        }
    }

    /** Sets the most connections held at once (those open past it stay; new ones wait for room). */
    public void most(int connections) {
        if (connections < 1) {
            throw new IllegalArgumentException("the most client connections must be at least 1, got " + connections);
        }
        this.most = connections;
    }

    public int most() {
        return most;
    }

    /**
     * Places the gateway's clients may not take: a sixteenth of the most, at least one (of two or more) and at most
     * {@value #MOST_KEPT}.
     */
    public int kept() {
        return most < 2 ? 0 : Math.max(1, Math.min(MOST_KEPT, most / 16));
    }

    /**
     * Takes a place for a connection just accepted by {@code port}: false when the most it may take are open, and the
     * connection is to be closed at once (counted in {@link #refused()}); true, and {@link #leave()} is to be called
     * once when it closes.
     */
    public boolean take(Port port) {
        int bound = most;
        if (port == Port.GATEWAY) {
            bound -= kept();
        }
        // raised only below the bound: a raise past it undone after, as first written, held a kept place for that
        // moment, and an admin connection coming then was refused (a review had 2,584 of 7,378 scrapes refused)
        for (int now = open.get(); ; now = open.get()) {
            if (now >= bound) {
                refused.increment();
                return false;
            }
            if (open.compareAndSet(now, now + 1)) {
                return true;
            }
        }
    }

    /** Gives back the place of a connection {@link #take()} took, as it closes. */
    public void leave() {
        open.decrementAndGet();
    }

    /**
     * Counts a change of the bytes of answers waiting for the socket on one connection. The gateway and the API
     * read no more of a client whose answers wait (under 1 MiB for one that reads nothing); past
     * {@link #mostUnsentAnswers()} over
     * every connection, a connection given another answer while more than 64 KB waits for it is cut off: a review had
     * 250 connections, each within its own bound, run a server of 256 MB out of direct memory.
     */
    public void unsentChanged(long bytes) {
        unsent.add(bytes);
    }

    /** Bytes of answers waiting for the socket, over every connection. */
    public long unsentAnswers() {
        return unsent.sum();
    }

    public long mostUnsentAnswers() {
        return mostUnsent;
    }

    /** Sets the most bytes of answers waiting over every connection (default {@link #MOST_UNSENT_ANSWERS}). */
    public void mostUnsentAnswers(long bytes) {
        if (bytes < 1) {
            throw new IllegalArgumentException("the most bytes of unsent answers must be at least 1, got " + bytes);
        }
        this.mostUnsent = bytes;
    }

    /** The client connections open now. */
    public int open() {
        return open.get();
    }

    /** The connections closed as they were accepted, because the most were open. */
    public long refused() {
        return refused.sum();
    }
}
