package dev.sluice.algorithm;

import dev.sluice.Limit;

/**
 * sliding-window, the weighted sliding window counter: fixed windows, and the previous window's count
 * weighted by how much of it still overlaps a window of length {@code P} ending now.
 *
 * <p>With {@code prev = n_{w−1}}, {@code curr = n_w} and the time elapsed in the current window
 * {@code e = t − w·P}, the estimate is {@code prev·(P − e)/P + curr}. The test {@code estimate + c ≤ L} is
 * made without division, {@code prev·(P − e) ≤ (L − curr − c)·P}, on 126-bit products ({@link MulDiv}),
 * so no decision depends on rounding.
 *
 * <p>The estimate only falls as time passes, so the wait of a rejected request has a closed form:
 * <ul>
 *   <li>if {@code k = L − curr − c ≥ 0}, the request fits later in this window, once
 *       {@code prev·(P − e − d) ≤ k·P}: {@code d = (P − e) − floor(k·P/prev)};</li>
 *   <li>otherwise it must wait for the next window, where {@code curr} becomes the weighted count:
 *       {@code d = (P − e) + max(0, P − floor((L − c)·P/curr))}.</li>
 * </ul>
 */
final class SlidingWindow implements Transition<SlidingWindow.Counters> {
    /** The counts of window {@code index} and of the one before it. */
    static final class Counters extends KeyState {
        final long index;
        final long prev;
        final long curr;
        private final long expiresAt;

        Counters(long time, long index, long prev, long curr, long expiresAt) {
            super(time);
            this.index = index;
            this.prev = prev;
            this.curr = curr;
            this.expiresAt = expiresAt;
        }

        @Override
        public long expiresAt() {
            return expiresAt;
        }
    }

    private final long limit;
    private final long period;

    SlidingWindow(Limit limit) {
        this.limit = limit.amount();
        this.period = limit.periodNanos();
    }

    @Override
    public Counters advance(Counters state, long t) {
        long window = t / period;
        if (state == null || state.index == window) {
            return state;
        }
        if (state.index == window - 1 && state.curr > 0) {
            return new Counters(state.time, window, state.curr, 0, state.expiresAt);
        }
        return null;
    }

    @Override
    public long wait(Counters state, long t, long cost) {
        if (cost > limit) {
            return NEVER;
        }
        long prev = state == null ? 0 : state.prev;
        long curr = state == null ? 0 : state.curr;
        long toWindowEnd = period - t % period; // P − e
        long spare = limit - curr - cost;      // k
        if (spare >= 0) {
            if (MulDiv.compareProducts(prev, toWindowEnd, spare, period) <= 0) {
                return 0;
            }
            return toWindowEnd - MulDiv.floor(spare, period, prev);
        }
        return toWindowEnd + Math.max(0, period - MulDiv.floor(limit - cost, period, curr));
    }

    @Override
    public Counters take(Counters state, long t, long cost, long delay) {
        long window = t / period;
        // curr > 0 after this: untouched once the next window has ended too
        long expiresAt = (window + 2) * period;
        if (state == null) {
            return new Counters(t, window, 0, cost, expiresAt);
        }
        return new Counters(t, state.index, state.prev, state.curr + cost, expiresAt);
    }

    @Override
    public long remaining(Counters state, long t) {
        if (state == null) {
            return limit;
        }
        // floor(L − prev·(P − e)/P − curr) = L − curr − ceil(prev·(P − e)/P)
        long weighted = MulDiv.ceil(state.prev, period - t % period, period);
        return Math.max(0, limit - state.curr - weighted);
    }

    @Override
    public long resetAfter(Counters state, long t) {
        if (state == null) {
            return 0;
        }
        long windowEnd = (t / period + 1) * period;
        return (state.curr > 0 ? windowEnd + period : windowEnd) - t;
    }
}
