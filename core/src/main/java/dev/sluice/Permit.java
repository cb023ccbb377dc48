package dev.sluice;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The answer of a {@link ConcurrencyLimiter}: when granted, a lease on some in-flight capacity that
 * {@link #close()} gives back. Made for try-with-resources:
 *
 * <pre>{@code
 * try (Permit permit = limiter.tryAcquire("user-42")) {
 *     if (!permit.granted()) {
 *         return tooManyRequests(permit.decision().retryAfter());
 *     }
 *     return handle(request);
 * }
 * }</pre>
 *
 * Closing is idempotent, and closing a permit that was not granted, or whose lease has already expired, does
 * nothing: capacity is never given back twice.
 */
public final class Permit implements AutoCloseable {
    private final ConcurrencyLimiter limiter;
    private final String key;
    private final long lease;
    private final Decision decision;
    private final boolean turnedAway;
    private final AtomicBoolean closed = new AtomicBoolean();

    Permit(ConcurrencyLimiter limiter, String key, long lease, Decision decision, boolean turnedAway) {
        this.limiter = limiter;
        this.key = key;
        this.lease = lease;
        this.decision = decision;
        this.turnedAway = turnedAway;
    }

    /** Whether the capacity was granted. */
    public boolean granted() {
        return decision.allowed();
    }

    /**
     * The decision: {@code remaining} in-flight capacity after it; for a refusal, {@code retry_after} is the
     * wait until enough leases expire if none is released first.
     */
    public Decision decision() {
        return decision;
    }

    /**
     * Whether it was refused because the limiter held its most leases over all keys
     * ({@link ConcurrencyLimiter.Builder#maxPlaces}), not for its key's limit: its {@code retry_after} is then the
     * wait until the first lease the limiter holds expires, and its {@code remaining} 0.
     */
    public boolean turnedAway() {
        return turnedAway;
    }

    /** Gives the capacity back (once). */
    @Override
    public void close() {
        if (decision.allowed() && closed.compareAndSet(false, true)) {
            limiter.release(key, lease);
        }
    }
}
