package dev.sluice.algorithm;

import dev.sluice.Limit;

import java.util.Arrays;

/**
 * sliding-log: the log of admitted requests, exact over every window of length {@code P}.
 *
 * <p>An entry {@code (s, c)} counts at {@code t} iff {@code t − s < P}: it expires exactly {@code P} after
 * its admission, as {@code ZREMRANGEBYSCORE key -inf t−P} leaves it. Requests at the same instant share one
 * entry, so the log holds at most one entry per distinct admission time, and never more than {@code L}
 * entries: the cost of exactness is memory proportional to the limit, and a copy of the log on every
 * admission (states are immutable so that a store can swap them with one compare-and-set).
 */
final class SlidingLog implements Transition<SlidingLog.Log> {
    /**
     * Admission times, oldest first and all distinct, with their costs; {@code used} is the sum of the costs.
     */
    static final class Log extends KeyState {
        final long[] times;
        final long[] costs;
        final long used;
        private final long expiresAt;

        Log(long time, long[] times, long[] costs, long used, long expiresAt) {
            super(time);
            this.times = times;
            this.costs = costs;
            this.used = used;
            this.expiresAt = expiresAt;
        }

        int size() {
            return times.length;
        }

        @Override
        public long expiresAt() {
            return expiresAt;
        }
    }

    private final long limit;
    private final long period;

    SlidingLog(Limit limit) {
        this.limit = limit.amount();
        this.period = limit.periodNanos();
    }

    @Override
    public Log advance(Log state, long t) {
        if (state == null) {
            return null;
        }
        int expired = 0;
        long freed = 0;
        while (expired < state.size() && t - state.times[expired] >= period) {
            freed += state.costs[expired];
            expired++;
        }
        if (expired == 0) {
            return state;
        }
        if (expired == state.size()) {
            return null;
        }
        return new Log(state.time, Arrays.copyOfRange(state.times, expired, state.size()),
                Arrays.copyOfRange(state.costs, expired, state.size()), state.used - freed, state.expiresAt);
    }

    @Override
    public long wait(Log state, long t, long cost) {
        if (cost > limit) {
            return NEVER;
        }
        long used = state == null ? 0 : state.used;
        if (used + cost <= limit) {
            return 0;
        }
        for (int i = 0; ; i++) {
            used -= state.costs[i];
            if (used + cost <= limit) {
                return state.times[i] + period - t;
            }
        }
    }

    @Override
    public Log take(Log state, long t, long cost, long delay) {
        // the newest entry is this one: the log is untouched once it expires
        long expiresAt = t + period;
        if (state == null) {
            return new Log(t, new long[] {t}, new long[] {cost}, cost, expiresAt);
        }
        int last = state.size() - 1;
        if (state.times[last] == t) {
            long[] costs = state.costs.clone();
            costs[last] += cost;
            return new Log(t, state.times, costs, state.used + cost, expiresAt);
        }
        long[] times = Arrays.copyOf(state.times, last + 2);
        long[] costs = Arrays.copyOf(state.costs, last + 2);
        times[last + 1] = t;
        costs[last + 1] = cost;
        return new Log(t, times, costs, state.used + cost, expiresAt);
    }

    @Override
    public long remaining(Log state, long t) {
        // at least 0: a sum past the limit is a log kept under a larger one (its limit lowered)
        return Math.max(0, limit - (state == null ? 0 : state.used));
    }

    @Override
    public long resetAfter(Log state, long t) {
        return state == null ? 0 : state.times[state.size() - 1] + period - t;
    }
}
