package dev.sluice;

/**
 * Hears every decision of a {@link RateLimiter}: the hook a metrics module uses without the core depending on it.
 * Exactly one method is called per decision, on the thread that asked for it ({@code tryAcquire},
 * {@code acquire}), or, for {@code tryAcquireAsync}, on the thread that completes its stage: the caller's for the
 * in-memory store and for a Redis store's answers of its own (a remembered rejection, an open breaker); for Redis's
 * answers a connection's reading thread, or Lettuce's event loop on a Cluster; for a call that timed out, the
 * store's timer thread. Implementations
 * must be quick, must not block, and must be thread-safe; an exception they throw is logged and never reaches the
 * request path.
 */
public interface DecisionListener {
    /** Admitted without a delay (a peek, cost 0, counts here too). */
    default void admitted(String key, long cost, Decision decision) {
    }

    /** Admitted with a delay: the caller holds the request for {@link Decision#delay()} before it proceeds. */
    default void delayed(String key, long cost, Decision decision) {
    }

    /** Rejected; nothing was taken. */
    default void rejected(String key, long cost, Decision decision) {
    }

    /**
     * A delayed request ({@code acquire}) whose caller was interrupted while it held it: it does not proceed, and its
     * cost stays taken (a reservation is not given back). Heard after {@link #delayed} for the same decision, so that
     * a count of requests that went ahead is delayed less abandoned.
     */
    default void abandoned(String key, long cost, Decision decision) {
    }
}
