package dev.sluice.algorithm;

import dev.sluice.Limit;

/**
 * gcra, greedy token-bucket and leaky-bucket: one mathematics seen three ways.
 *
 * <h2>One number per key</h2>
 * The emission interval is {@code T = P/L}: the time one unit of cost takes to come back. The whole state of
 * a key is the theoretical arrival time {@code TAT}, the instant at which the key would be untouched again
 * if nothing else arrived. A request of cost {@code c} at {@code t} moves it to
 * {@code new_tat = max(TAT, t) + c·T} and is admitted iff {@code new_tat − t ≤ B·T}.
 *
 * <ul>
 *   <li>A <b>token bucket</b> of capacity {@code B} refilled at {@code L/P} holds
 *       {@code tokens(t) = B − (TAT − t)/T} while {@code TAT > t} and {@code B} after; "tokens ≥ c" is
 *       "{@code new_tat − t ≤ B·T}", "floor(tokens after)" is {@code remaining}, and the wait until full is
 *       {@code TAT − t}. So greedy token-bucket is gcra, decision for decision and field for field.</li>
 *   <li>A <b>leaky bucket</b> of capacity {@code B} draining at {@code L/P} holds
 *       {@code level(t) = (TAT − t)/T}; "{@code level + c ≤ B}" is the same test again. Seen as a FIFO queue
 *       (shaping), a request admitted at {@code t} leaves when the queue ahead of it has drained:
 *       {@code delay = level·T = max(TAT, t) − t}, which is {@link #resetAfter} of the state before it.</li>
 * </ul>
 *
 * <h2>Exact arithmetic</h2>
 * {@code T = P/L} is rarely a whole number of nanoseconds (3 per second is 333,333,333⅓ ns), and rounding it
 * would let the error pile up over many requests until a limit admits more, or fewer, than it says. So a
 * TAT is kept as a whole part in nanoseconds and a numerator over {@code L}:
 * {@code TAT = nanos + frac/L} with {@code 0 ≤ frac < L}. Every sum of the algorithm is then exact, and
 * only what leaves it is rounded: waits up to the next whole nanosecond (the first instant at which the
 * request fits), {@code remaining} down.
 *
 * <p>Bounds: {@code B·T} is refused past {@link #MAX_DEPTH_NANOS} (36 years), so {@code TAT − t} stays far
 * inside a long together with any {@code max_delay}.
 */
final class Gcra implements Transition<Gcra.Tat> {
    /** The bound on {@code B·T}: 2^60 ns, refused at it or beyond. */
    static final long MAX_DEPTH_NANOS = 1L << 60;

    /** The theoretical arrival time {@code nanos + frac/L}, {@code 0 ≤ frac < L}. */
    static final class Tat extends KeyState {
        final long nanos;
        final long frac;

        Tat(long time, long nanos, long frac) {
            super(time);
            this.nanos = nanos;
            this.frac = frac;
        }

        @Override
        public long expiresAt() {
            return frac == 0 ? nanos : nanos + 1;
        }
    }

    private final long rate;        // L: the denominator of every fraction here
    private final long period;      // P
    private final long burst;       // B
    private final long stepNanos;   // T = stepNanos + stepFrac/L
    private final long stepFrac;
    private final long depthNanos;  // B·T = depthNanos + depthFrac/L
    private final long depthFrac;

    Gcra(Limit limit) {
        this.rate = limit.amount();
        this.period = limit.periodNanos();
        this.burst = limit.burst();
        this.stepNanos = period / rate;
        this.stepFrac = period % rate;
        this.depthNanos = depth(limit);
        this.depthFrac = MulDiv.mod(burst, period, rate);
    }

    /**
     * {@code floor(B·P/L)}, refused at {@link #MAX_DEPTH_NANOS} or more: a bucket's depth in time. The interval
     * bucket is bound by it too, since the time until it is full again is at most its depth plus the delay.
     */
    static long depth(Limit limit) {
        long depth;
        try {
            depth = MulDiv.floor(limit.burst(), limit.periodNanos(), limit.amount());
        } catch (ArithmeticException tooLong) {
            depth = Long.MAX_VALUE;
        }
        if (depth >= MAX_DEPTH_NANOS) {
            throw new IllegalArgumentException("limit " + limit + ": burst × period / amount must be below "
                    + MAX_DEPTH_NANOS + "ns (2^60), got " + (depth == Long.MAX_VALUE ? "more" : depth + "ns"));
        }
        return depth;
    }

    @Override
    public Tat advance(Tat state, long t) {
        // a fraction over another L (a gcra of other limits decided this key: a rule changed) is no TAT of this
        // one, and would break 0 <= frac < L in every sum below: untouched, as the Redis store reads it
        return state == null || state.frac >= rate || !isAfter(state, t) ? null : state;
    }

    private static boolean isAfter(Tat tat, long t) {
        return tat.nanos > t || (tat.nanos == t && tat.frac > 0);
    }

    @Override
    public long wait(Tat state, long t, long cost) {
        if (cost > burst) {
            return NEVER;
        }
        // excess = max(TAT, t) + c·T − t − B·T, as whole nanoseconds and a numerator over L (no allocation:
        // this runs on every decision)
        long nanos = (state == null ? 0 : state.nanos - t) - depthNanos + stepsNanos(cost);
        long frac = (state == null ? 0 : state.frac) - depthFrac + stepsFrac(cost);
        if (frac >= rate) {
            frac -= rate;
            nanos++;
        } else if (frac < 0) {
            frac += rate;
            nanos--;
        }
        if (nanos < 0 || (nanos == 0 && frac == 0)) {
            return 0;
        }
        return frac == 0 ? nanos : nanos + 1;
    }

    @Override
    public Tat take(Tat state, long t, long cost, long delay) {
        long nanos = (state == null ? t : state.nanos) + stepsNanos(cost);
        long frac = (state == null ? 0 : state.frac) + stepsFrac(cost);
        if (frac >= rate) {
            frac -= rate;
            nanos++;
        }
        return new Tat(t, nanos, frac);
    }

    /** The whole nanoseconds of {@code c·T}. */
    private long stepsNanos(long cost) {
        return cost == 1 ? stepNanos : MulDiv.floor(cost, period, rate);
    }

    /** The numerator over {@code L} of the fraction of {@code c·T}. */
    private long stepsFrac(long cost) {
        return cost == 1 ? stepFrac : MulDiv.mod(cost, period, rate);
    }

    @Override
    public long remaining(Tat state, long t) {
        if (state == null) {
            return burst;
        }
        // floor((B·T − (TAT − t)) / T) = floor(x·L / P) with x = B·T − (TAT − t) = nanos + frac/L
        long nanos = depthNanos - (state.nanos - t);
        long frac = depthFrac - state.frac;
        if (frac < 0) {
            frac += rate;
            nanos--;
        }
        if (nanos < 0) {
            return 0; // in debt: delay mode has reserved capacity ahead of time
        }
        return MulDiv.floor(nanos, rate, frac, period);
    }

    @Override
    public long resetAfter(Tat state, long t) {
        if (state == null) {
            return 0;
        }
        return state.nanos - t + (state.frac == 0 ? 0 : 1);
    }
}
