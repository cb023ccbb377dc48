package dev.sluice;

import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The entry point: decides, for a key and a cost, whether a request goes ahead now, later or not at all.
 *
 * <pre>{@code
 * RateLimiter limiter = RateLimiter.builder()
 *         .algorithm(Algorithm.SLIDING_WINDOW)
 *         .limit("600/1m")
 *         .limit("3600/1h")
 *         .build();
 * Decision decision = limiter.tryAcquire("user-42");
 * if (!decision.allowed()) {
 *     // 429, Retry-After: decision.retryAfter()
 * }
 * }</pre>
 *
 * <p>A limiter is a {@link Rule} (algorithm, limits, mode) applied to the keys of a {@link Store}. The
 * decision itself is a pure function of the key's state (see {@link Rule#decide}); the store makes it atomic
 * (one compare-and-set in memory, one script on Redis), so every store gives the same answers. Time comes
 * from the limiter's {@link Clock} when one is set, otherwise from the store's own clock (the Redis
 * server's, for the Redis store). Thread-safe.
 */
public final class RateLimiter {
    private final Rule rule;
    private final Store store;
    private final Clock clock;

    private RateLimiter(Rule rule, Store store, Clock clock) {
        this.rule = rule;
        this.store = store;
        this.clock = clock;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Decides a request of cost 1 on {@code key}. */
    public Decision tryAcquire(String key) {
        return tryAcquire(key, 1);
    }

    /**
     * Decides a request of {@code cost} on {@code key}; cost 0 is a peek that changes nothing.
     *
     * @throws IllegalArgumentException for an empty key or a negative cost; no decision is made
     */
    public Decision tryAcquire(String key, long cost) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
        return store.decide(rule, key, cost, clock == null ? Store.STORE_CLOCK : clock.nanos());
    }

    /** Forgets everything about {@code key}. */
    public void reset(String key) {
        store.reset(rule, key);
    }

    public Rule rule() {
        return rule;
    }

    public Store store() {
        return store;
    }

    /** Chooses the algorithm, the limits, the mode, the store and the clock of a {@link RateLimiter}. */
    public static final class Builder {
        private Algorithm algorithm = Algorithm.TOKEN_BUCKET;
        private final List<Limit> limits = new ArrayList<>();
        private Mode mode = Mode.REJECT;
        private long maxDelayNanos;
        private Store store;
        private Clock clock;

        private Builder() {
        }

        /** The algorithm of every limit (default {@link Algorithm#TOKEN_BUCKET}). */
        public Builder algorithm(Algorithm algorithm) {
            this.algorithm = algorithm;
            return this;
        }

        /** Adds a limit; several limits stack on each key, all-or-nothing. */
        public Builder limit(Limit limit) {
            limits.add(limit);
            return this;
        }

        /** Adds a limit written as {@code 600/1m} (see {@link Limit#parse}). */
        public Builder limit(String limit) {
            return limit(Limit.parse(limit));
        }

        /** Reject (the default), or shaping for leaky-bucket. For delay mode use {@link #delay(Duration)}. */
        public Builder mode(Mode mode) {
            this.mode = mode;
            return this;
        }

        /** Delay mode: a request that fits within {@code maxDelay} is admitted with a delay instead of rejected. */
        public Builder delay(Duration maxDelay) {
            this.mode = Mode.DELAY;
            this.maxDelayNanos = maxDelay.toNanos();
            return this;
        }

        /** The algorithm, limits and mode of {@code rule}, replacing any chosen before. */
        public Builder rule(Rule rule) {
            this.algorithm = rule.algorithm();
            this.limits.clear();
            this.limits.addAll(rule.limits());
            this.mode = rule.mode();
            this.maxDelayNanos = rule.maxDelayNanos();
            return this;
        }

        /** Where keys live (default: a new {@link InMemoryStore}). */
        public Builder store(Store store) {
            this.store = store;
            return this;
        }

        /** The time of each decision (default: the store's own clock). */
        public Builder clock(Clock clock) {
            this.clock = clock;
            return this;
        }

        /**
         * @throws IllegalArgumentException naming what is wrong (no limit, burst for fixed-window, delay mode
         *                                  for sliding-log, ...)
         */
        public RateLimiter build() {
            Rule rule = Rule.of(algorithm, limits, mode, mode == Mode.DELAY ? maxDelayNanos : 0);
            return new RateLimiter(rule, store == null ? new InMemoryStore() : store, clock);
        }
    }
}
