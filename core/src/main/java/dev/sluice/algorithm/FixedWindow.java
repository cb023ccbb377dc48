package dev.sluice.algorithm;

import dev.sluice.Limit;

/**
 * fixed-window: one counter per window {@code w = floor(t/P)}, windows aligned to multiples of {@code P}
 * from the epoch. A request is admitted iff {@code n_w + c ≤ L}. Simple and small, but up to {@code 2L} can
 * pass around a window boundary; sliding-window and sliding-log exist for that.
 */
final class FixedWindow implements Transition<FixedWindow.Window> {
    /** {@code count} units taken in the window that ends at {@code end}. */
    static final class Window extends KeyState {
        final long end;
        final long count;

        Window(long time, long end, long count) {
            super(time);
            this.end = end;
            this.count = count;
        }

        @Override
        public long expiresAt() {
            return end;
        }
    }

    private final long limit;
    private final long period;

    FixedWindow(Limit limit) {
        this.limit = limit.amount();
        this.period = limit.periodNanos();
    }

    @Override
    public Window advance(Window state, long t) {
        return state == null || state.end != windowEnd(t) ? null : state;
    }

    @Override
    public long wait(Window state, long t, long cost) {
        if (cost > limit) {
            return NEVER;
        }
        long count = state == null ? 0 : state.count;
        return count + cost <= limit ? 0 : windowEnd(t) - t;
    }

    @Override
    public Window take(Window state, long t, long cost, long delay) {
        return new Window(t, windowEnd(t), (state == null ? 0 : state.count) + cost);
    }

    @Override
    public long remaining(Window state, long t) {
        // at least 0: a count past the limit is a window counted under a larger one (its limit lowered)
        return Math.max(0, limit - (state == null ? 0 : state.count));
    }

    @Override
    public long resetAfter(Window state, long t) {
        return state == null ? 0 : windowEnd(t) - t;
    }

    private long windowEnd(long t) {
        return (t / period + 1) * period;
    }
}
