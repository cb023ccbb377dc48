package dev.sluice;

/**
 * Hears every decision of a {@link RateLimiter}, on the thread that asked for it: the hook a metrics module
 * uses without the core depending on it. Exactly one method is called per decision. Implementations must be
 * quick and thread-safe; an exception they throw is logged and never reaches the request path.
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
}
