package dev.sluice.algorithm;

import dev.sluice.Limit;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * sliding-log: the log of admitted requests, exact over every window of length {@code P}.
 *
 * <p>An entry {@code (s, c)} counts at {@code t} iff {@code t − s < P}: it expires exactly {@code P} after
 * its admission, as {@code ZREMRANGEBYSCORE key -inf t−P} leaves it. The log never holds more than {@code L}
 * entries (each costs at least 1; a log kept under a limit since lowered, the old {@code L}): the cost of exactness
 * is memory proportional to the limit.
 *
 * <h2>Appending to an immutable log without copying it</h2>
 *
 * States are immutable so that a store can swap them with one compare-and-set, and a log copied whole at every
 * admission cost each decision time proportional to its length (a limit of 10,000 copied 160 KB a decision). So a
 * {@link Log} is the slots {@code [start, end)} of two arrays it shares with the logs before and after it:
 * <ul>
 *   <li>expiring entries moves {@code start} forward: the new log is a narrower view of the same arrays;
 *   <li>appending writes slot {@code end} and widens the view by one, provided no other log took that slot
 *       first. A slot is free while its cost is 0 (a cost is at least 1); a log takes it by setting its cost with a
 *       compare-and-set from 0, so that of two threads appending to the same log one writes the slot and the other
 *       copies. A slot is written once, before the log that holds it is published by the store's compare-and-set
 *       (which orders the writes before any read of that log), and no log reads past its own {@code end}: a log
 *       never sees what a later one appends. A slot taken by a log that then loses the store's compare-and-set
 *       stays unused, and the next append from that state copies;
 *   <li>when the arrays are full or the slot is taken, the new log copies its entries into arrays half as long
 *       again: while a log grows, a copy of {@code n} entries comes after some {@code n/3} appends (the arrays grow
 *       by half, and by 3 at least), so one appender pays amortised constant time, and the arrays never hold more
 *       than about 1.5 {@code L} entries. A thread that finds the slot taken by another copies the whole log, as
 *       every admission did before;
 *   <li>and when they are more than four times as long as the entries left, so that a burst long expired would
 *       keep its memory until appends reached the arrays' end (hours, at a request a minute after 9,000 at once: a
 *       review found it), an admission copies too: such a copy of {@code n} entries comes after some {@code n} of
 *       them expired, each paid for by its own admission.
 * </ul>
 * Requests at the same instant each have an entry (one cannot add to an entry other logs share). The decisions
 * are those of one entry per instant: the walk in {@link #wait} ends at a time, whichever of its entries it is.
 */
final class SlidingLog implements Transition<SlidingLog.Log> {
    private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(long[].class);
    /** Free slots a log's arrays gain at least when they are copied: a key's first log has none. */
    private static final int LEAST_ROOM = 3;
    /** Arrays this many times as long as their entries (and one more), and an admission copies them smaller. */
    private static final int MOST_SLACK = 4;

    /**
     * Admission times, oldest first, with their costs: slots {@code [start, end)} of the arrays;
     * {@code used} is the sum of the costs.
     */
    static final class Log extends KeyState {
        final long[] times;
        final long[] costs;
        final int start;
        final int end;
        final long used;
        private final long expiresAt;

        Log(long time, long[] times, long[] costs, int start, int end, long used, long expiresAt) {
            super(time);
            this.times = times;
            this.costs = costs;
            this.start = start;
            this.end = end;
            this.used = used;
            this.expiresAt = expiresAt;
        }

        int size() {
            return end - start;
        }

        /** Takes slot {@code end} for a log one entry longer, or says that it is taken or past the arrays. */
        boolean claim(long cost) {
            return end < costs.length && SLOT.compareAndSet(costs, end, 0L, cost);
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
        int first = state.start;
        long freed = 0;
        while (first < state.end && t - state.times[first] >= period) {
            freed += state.costs[first];
            first++;
        }
        if (first == state.start) {
            return state;
        }
        if (first == state.end) {
            return null;
        }
        return new Log(state.time, state.times, state.costs, first, state.end, state.used - freed, state.expiresAt);
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
        for (int i = state.start; ; i++) {
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
            return new Log(t, new long[] {t}, new long[] {cost}, 0, 1, cost, expiresAt);
        }
        int size = state.size();
        if (state.costs.length - LEAST_ROOM <= MOST_SLACK * (size + 1) && state.claim(cost)) {
            state.times[state.end] = t;
            return new Log(t, state.times, state.costs, state.start, state.end + 1, state.used + cost, expiresAt);
        }
        long[] times = new long[size + 1 + Math.max(size >> 1, LEAST_ROOM)];
        long[] costs = new long[times.length];
        System.arraycopy(state.times, state.start, times, 0, size);
        System.arraycopy(state.costs, state.start, costs, 0, size);
        times[size] = t;
        costs[size] = cost;
        return new Log(t, times, costs, 0, size + 1, state.used + cost, expiresAt);
    }

    @Override
    public long remaining(Log state, long t) {
        // at least 0: a sum past the limit is a log kept under a larger one (its limit lowered)
        return Math.max(0, limit - (state == null ? 0 : state.used));
    }

    @Override
    public long resetAfter(Log state, long t) {
        return state == null ? 0 : state.times[state.end - 1] + period - t;
    }
}
