package dev.sluice.algorithm;

import dev.sluice.Limit;

/**
 * token-bucket with interval refill: {@code L} tokens at once every {@code P}, capped at the capacity
 * {@code B}; a key starts full.
 *
 * <p>The refills are counted from the request that found the bucket full: the first request of a key, and
 * again the first one after the bucket has filled up. A full bucket is the untouched state, so this is what
 * makes a key that a store dropped (in memory) or let expire (Redis TTL = {@code reset_after}) behave
 * exactly like one that was kept: the schedule never depends on how long a full bucket was remembered.
 *
 * <p>In delay mode the tokens may go below zero: reserved ahead of the refills that will pay for them. A
 * reservation takes its cost from what the bucket holds when the request starts, capped at {@code B} like every
 * refill: the stored tokens are {@code min(tokens, B − k·L) − cost} for a start {@code k} refills ahead, so that
 * {@code k} refills later they are {@code min(B, tokens + k·L) − cost}. Taking {@code cost} from the uncapped sum
 * (as first written) let the tokens left over before a refill slip past the cap: at {@code 4/10s burst=2}, four
 * requests started at each refill where the bucket holds two (a review found twice the rate over ten minutes).
 */
final class IntervalBucket implements Transition<IntervalBucket.Tokens> {
    /** {@code tokens} now (below {@code B}, below 0 when reserved), and the time of the next refill. */
    static final class Tokens extends KeyState {
        final long nextRefill;
        final long tokens;
        private final long expiresAt;

        Tokens(long time, long nextRefill, long tokens, long expiresAt) {
            super(time);
            this.nextRefill = nextRefill;
            this.tokens = tokens;
            this.expiresAt = expiresAt;
        }

        @Override
        public long expiresAt() {
            return expiresAt;
        }
    }

    private final long refill;
    private final long period;
    private final long capacity;

    IntervalBucket(Limit limit) {
        this.refill = limit.amount();
        this.period = limit.periodNanos();
        this.capacity = limit.burst();
        Gcra.depth(limit); // so that fullAt, (refills − 1)·P past the next refill, stays inside a long
    }

    @Override
    public Tokens advance(Tokens state, long t) {
        if (state == null || state.tokens > capacity) {
            return null; // more than it holds: another rule's (a larger burst), untouched, as the Redis store reads it
        }
        if (t < state.nextRefill) {
            return state;
        }
        long refills = (t - state.nextRefill) / period + 1;
        if (refills >= refillsUntil(state.tokens, capacity)) {
            return null;
        }
        return new Tokens(state.time, state.nextRefill + refills * period, state.tokens + refills * refill,
                state.expiresAt);
    }

    /** How many refills it takes to hold {@code wanted} tokens, from {@code tokens}. */
    private long refillsUntil(long tokens, long wanted) {
        return (wanted - tokens + refill - 1) / refill;
    }

    @Override
    public long wait(Tokens state, long t, long cost) {
        if (cost > capacity) {
            return NEVER;
        }
        if (state == null || state.tokens >= cost) {
            return 0;
        }
        return state.nextRefill + (refillsUntil(state.tokens, cost) - 1) * period - t;
    }

    @Override
    public Tokens take(Tokens state, long t, long cost, long delay) {
        long nextRefill = state == null ? t + period : state.nextRefill;
        long tokens = state == null ? capacity : state.tokens;
        long start = t + delay;
        if (start >= nextRefill) { // the refills before the start, each capped at B (bounded by the rule's max delay)
            tokens = Math.min(tokens, capacity - ((start - nextRefill) / period + 1) * refill);
        }
        tokens -= cost;
        return new Tokens(t, nextRefill, tokens, fullAt(nextRefill, tokens));
    }

    @Override
    public long remaining(Tokens state, long t) {
        return state == null ? capacity : Math.max(0, state.tokens);
    }

    @Override
    public long resetAfter(Tokens state, long t) {
        if (state == null) {
            return 0;
        }
        return state.expiresAt - t;
    }

    /** When the bucket is full again, from {@code tokens} with the next refill at {@code nextRefill}. */
    private long fullAt(long nextRefill, long tokens) {
        return nextRefill + (refillsUntil(tokens, capacity) - 1) * period;
    }
}
