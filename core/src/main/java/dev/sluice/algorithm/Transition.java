package dev.sluice.algorithm;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.Refill;

/**
 * One limit's algorithm as a pure state transition: no clock, no map, no I/O (DESIGN.md, rule 1).
 *
 * <p>A state {@code S} is an immutable value and {@code null} stands for the untouched state, so that a key
 * whose every limit is back to {@code null} can be dropped. {@link Rule} drives a decision in two steps:
 * {@link #advance} brings the state forward to the request's time {@code t} (time never runs backwards for a
 * key, so {@code t} is never before the state's own time); then {@link #wait}, {@link #take},
 * {@link #remaining} and {@link #resetAfter} read or change that advanced state at the same {@code t}.
 * Nothing here decides alone: admitting is all-or-nothing across the limits of a key, which only
 * {@link Rule} can see.
 *
 * <p>Durations are whole nanoseconds; where the exact value has a fraction (gcra's {@code P/L}), a wait is
 * rounded up: it is the first whole nanosecond at which the request fits.
 *
 * @param <S> the state of one limit of one key
 */
sealed interface Transition<S extends KeyState> permits FixedWindow, SlidingWindow, SlidingLog, IntervalBucket, Gcra {
    /** {@code wait} of a request whose cost is greater than the capacity. */
    long NEVER = -1;

    /** The state at {@code t}, or {@code null} when it has gone back to untouched. */
    S advance(S state, long t);

    /** How long until a request of {@code cost ≥ 1} fits: 0 now, {@link #NEVER} if it never will. */
    long wait(S state, long t, long cost);

    /**
     * The state after taking {@code cost ≥ 1} at {@code t}, with {@code t} as its time and
     * {@code t + resetAfter} as its expiry. Called when {@link #wait} is 0, and in delay mode
     * (token-bucket and gcra only) with a positive wait: then the cost is reserved ahead of time, for the request
     * that starts {@code delay} after {@code t} (the rule's delay: of this limit, or longer for another of the key's).
     * {@code delay} is 0 but in delay mode.
     */
    S take(S state, long t, long cost, long delay);

    /** Whole units of cost that could be admitted at {@code t}. */
    long remaining(S state, long t);

    /** The wait from {@code t} until the state is back to untouched if nothing else arrives. */
    long resetAfter(S state, long t);

    /** The transition of {@code algorithm} for {@code limit}. */
    static Transition<?> of(Algorithm algorithm, Limit limit) {
        return switch (algorithm) { // no default: a new algorithm is a compile error here
            case FIXED_WINDOW -> new FixedWindow(limit);
            case SLIDING_LOG -> new SlidingLog(limit);
            case SLIDING_WINDOW -> new SlidingWindow(limit);
            case TOKEN_BUCKET -> limit.refill() == Refill.INTERVAL ? new IntervalBucket(limit) : new Gcra(limit);
            case GCRA, LEAKY_BUCKET -> new Gcra(limit);
        };
    }
}
