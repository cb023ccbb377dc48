package dev.sluice.server;

/**
 * A server that stops gracefully when the process is asked to ({@code SIGTERM}): it takes nothing new, and lets what
 * it is handling finish, until a deadline. Closing it afterwards cuts what is left. A process stops every server it
 * runs at once ({@link #startDraining} on each), then waits for them all on one deadline: one after the other, a port
 * went on taking clients while another drained (a review found it).
 */
public interface Drains {
    /**
     * The process will stop taking clients soon ({@code --stop-delay}): health checks say so from now on (HTTP 503,
     * gRPC {@code NOT_SERVING}), so that load balancers, and Kubernetes' endpoints, take this server out while it
     * still serves everyone who comes; returns at once. Nothing else changes until {@link #startDraining}.
     *
     * @return whether it has health checks that now say so (the gateway's own port has none)
     */
    default boolean announceStopping() {
        return false;
    }

    /** Takes no new client from now on; returns at once. */
    void startDraining();

    /**
     * Waits for the requests being handled until they are over or {@code deadlineNanos} (on {@link System#nanoTime()})
     * has come, and ends what is left that can be answered then.
     */
    void awaitDrained(long deadlineNanos) throws InterruptedException;
}
