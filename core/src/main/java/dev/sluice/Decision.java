package dev.sluice;

import java.time.Duration;

/**
 * The answer to one request (docs/algorithms.md, "Every decision has these fields").
 *
 * @param allowed         the request is admitted and its cost is taken
 * @param remaining       whole units of cost that could still be admitted now, after this decision (≥ 0)
 * @param retryAfterNanos 0 when allowed; otherwise the smallest wait after which the same request would be
 *                        admitted if nothing else arrived; {@link #NEVER} when it can never be admitted
 * @param resetAfterNanos the wait until the key is back to its untouched state if nothing else arrived
 * @param delayNanos      in delay and shaping modes, how long the caller must hold the admitted request
 * @param limit           the limit that decided: for a rejection the one that needs the longest wait, for an
 *                        admission the one with the least remaining
 * @param limitResetAfterNanos the wait until {@code limit} alone is back to untouched if nothing else arrived: what
 *                        the response headers report beside that limit ({@code RateLimit}'s {@code t},
 *                        {@code X-RateLimit-Reset}). A key's other limits may take longer, so it is at most
 *                        {@code resetAfterNanos}, and equal to it for a key with one limit.
 * @param storeFailed     the store did not answer, and its failure policy decided: admitted as an untouched key would
 *                        be (fail-open), or rejected until the store is tried again (fail-closed). Nothing is known of
 *                        the key then, so the HTTP faces send no remaining count for it: a full quota shown during an
 *                        outage would tell clients to go ahead (Envoy's and Kong's limiters send none then either)
 */
public record Decision(boolean allowed, long remaining, long retryAfterNanos, long resetAfterNanos,
                       long delayNanos, Limit limit, long limitResetAfterNanos, boolean storeFailed) {
    /** {@code retry_after} of a request that can never be admitted: its cost is greater than the capacity. */
    public static final long NEVER = -1;

    /** A decision the store made. */
    public Decision(boolean allowed, long remaining, long retryAfterNanos, long resetAfterNanos, long delayNanos,
                    Limit limit, long limitResetAfterNanos) {
        this(allowed, remaining, retryAfterNanos, resetAfterNanos, delayNanos, limit, limitResetAfterNanos, false);
    }

    /** The decision on a key with one limit, {@code limit}: the key's reset is that limit's. */
    public Decision(boolean allowed, long remaining, long retryAfterNanos, long resetAfterNanos, long delayNanos,
                    Limit limit) {
        this(allowed, remaining, retryAfterNanos, resetAfterNanos, delayNanos, limit, resetAfterNanos);
    }

    /**
     * The wait before the same request may be admitted: zero when admitted, and {@code -1 ns} when it never can be
     * ({@link #never()}, checked first: a negative wait slept or scheduled is no wait at all).
     */
    public Duration retryAfter() {
        return Duration.ofNanos(retryAfterNanos);
    }

    public Duration resetAfter() {
        return Duration.ofNanos(resetAfterNanos);
    }

    public Duration delay() {
        return Duration.ofNanos(delayNanos);
    }

    /** Whether the request can never be admitted, whatever the wait. */
    public boolean never() {
        return retryAfterNanos == NEVER;
    }
}
