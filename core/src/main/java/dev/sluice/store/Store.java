package dev.sluice.store;

import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Where the state of keys lives and how one decision on it is made atomic: the in-memory store with one
 * compare-and-set, the Redis store with one script. Every store gives the same decisions on the same trace
 * (docs/algorithms.md); the store conformance suite in sluice-testkit holds each to it.
 *
 * <p>A store keeps one state per key: the keys of limiters with different rules that share a store must not
 * collide. Give each limiter keys of its own, or a store of its own; stores on one Redis share its keys, so there
 * a store of its own is one with a namespace of its own ({@code RedisStore.builder(uri).namespace("login")}).
 */
public interface Store {
    /** The time to pass to {@link #decide} for "now on the store's own clock". */
    long STORE_CLOCK = Long.MIN_VALUE;

    /**
     * Decides a request of {@code cost} (0 = peek) on {@code key} under {@code rule} at {@code nowNanos}
     * (nanoseconds since the epoch) or, when that is {@link #STORE_CLOCK}, at the store's own time.
     *
     * @throws IllegalArgumentException for a negative cost or a time out of range; no decision is made
     */
    Decision decide(Rule rule, String key, long cost, long nowNanos);

    /**
     * {@link #decide} through a stage. A store that does I/O completes it when the answer arrives, without
     * holding the calling thread; the in-memory store answers at once.
     */
    default CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, long nowNanos) {
        try {
            return CompletableFuture.completedFuture(decide(rule, key, cost, nowNanos));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * {@link #decide} at the time {@code clock} tells (a limiter's own clock), read as late as the store can: the
     * in-memory store reads it once it has found the key, so that a key another thread drops as untouched at a
     * later reading is not decided as fresh at an earlier one (a bug pinned in RateLimiterFacesTest). By default, read
     * before.
     */
    default Decision decide(Rule rule, String key, long cost, dev.sluice.Clock clock) {
        return decide(rule, key, cost, clock.nanos());
    }

    /** {@link #decideAsync} at the time {@code clock} tells, read as late as the store can (see above). */
    default CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, dev.sluice.Clock clock) {
        return decideAsync(rule, key, cost, clock.nanos());
    }

    /**
     * Checks that this store can decide {@code rule}, before anything is decided: a rule a store cannot decide
     * would fail every decision, so it is refused where it is made ({@code RateLimiter.Builder.build}, a
     * configuration as it loads). The in-memory store decides every rule; the Redis store refuses limits its Lua
     * arithmetic could not keep exact.
     *
     * @throws IllegalArgumentException naming the limit (or the max delay) the store cannot decide
     */
    default void check(Rule rule) {
    }

    /**
     * The longest max delay a rule in delay mode may have on this store: how long {@code RateLimiter.acquire}
     * reserves for at most, however long its {@code maxWait}. {@code DurationFormat.MAX_NANOS} unless the store
     * says less (the Redis store: 2^52 ns, about 52 days).
     */
    default long longestDelayNanos() {
        return dev.sluice.DurationFormat.MAX_NANOS;
    }

    /** {@link #longestDelayNanos()} for {@code rule}, which may be less on a store that bounds some rules more. */
    default long longestDelayNanos(Rule rule) {
        return longestDelayNanos();
    }

    /** Forgets {@code key}: its next request finds it untouched. */
    void reset(Rule rule, String key);
}
