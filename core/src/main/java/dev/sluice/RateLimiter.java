package dev.sluice;

import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;

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
 *
 * <h2>Faces</h2>
 * <ul>
 *   <li>{@link #tryAcquire} answers at once: a wall. The decision says whether to go ahead, and if not,
 *       when to retry.</li>
 *   <li>{@link #tryAcquireAsync} answers through a {@link CompletionStage}, for stores that do I/O.</li>
 *   <li>{@link #acquire} waits instead of rejecting: a valve. It waits out what the decision asks, up to
 *       {@code maxWait}, and gives up without taking anything when the wait would be longer.</li>
 * </ul>
 * A {@link DecisionListener} hears every decision of every face.
 */
public final class RateLimiter {
    private final Rule rule;
    private final Store store;
    private final Clock clock;

    private final Sleeper sleeper;
    private final DecisionListener[] listeners;

    private RateLimiter(Rule rule, Store store, Clock clock, Sleeper sleeper, DecisionListener[] listeners) {
        this.rule = rule;
        this.store = store;
        this.clock = clock;
        this.sleeper = sleeper;
        this.listeners = listeners;
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
        return decide(rule, key, cost);
    }

    private Decision decide(Rule applied, String key, long cost) {
        check(key, cost);
        Decision decision = store.decide(applied, key, cost, now());
        if (listeners.length > 0) {
            tell(key, cost, decision);
        }
        return decision;
    }

    private static void check(String key, long cost) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
    }

    private long now() {
        return clock == null ? Store.STORE_CLOCK : clock.nanos();
    }

    private void tell(String key, long cost, Decision decision) {
        for (DecisionListener listener : listeners) {
            try {
                if (!decision.allowed()) {
                    listener.rejected(key, cost, decision);
                } else if (decision.delayNanos() > 0) {
                    listener.delayed(key, cost, decision);
                } else {
                    listener.admitted(key, cost, decision);
                }
            } catch (RuntimeException e) {
                System.getLogger(RateLimiter.class.getName())
                        .log(System.Logger.Level.WARNING, "a decision listener failed; the decision stands", e);
            }
        }
    }

    /** {@link #tryAcquire(String, long)} through a stage: for stores that do I/O, the thread is not held. */
    public CompletionStage<Decision> tryAcquireAsync(String key, long cost) {
        check(key, cost);
        CompletionStage<Decision> decision = store.decideAsync(rule, key, cost, now());
        return listeners.length == 0 ? decision : decision.thenApply(d -> {
            tell(key, cost, d);
            return d;
        });
    }

    /** {@link #tryAcquireAsync(String, long)} of cost 1. */
    public CompletionStage<Decision> tryAcquireAsync(String key) {
        return tryAcquireAsync(key, 1);
    }

    /**
     * Waits until the request may proceed, for at most {@code maxWait}: the valve instead of the wall.
     *
     * <p>Token-bucket and gcra reserve the cost at once (delay mode with {@code max_delay = maxWait}) and then
     * sleep the delay: one decision, and the request keeps its place in line. The other algorithms cannot
     * reserve; they sleep each rejection's {@code retry_after} and ask again while the total stays within
     * {@code maxWait}. A delay the decision asks for (shaping) is slept too.
     *
     * @return the decision: admitted once the wait is over, or rejected (nothing taken) when the wait would
     *         pass {@code maxWait} or the cost can never fit
     * @throws InterruptedException if the thread is interrupted while waiting; a cost already reserved is
     *                              not given back
     */
    public Decision acquire(String key, long cost, Duration maxWait) throws InterruptedException {
        long budget = maxWait.toNanos();
        if (budget < 0) {
            throw new IllegalArgumentException("maxWait must be >= 0, got " + maxWait);
        }
        if (budget > 0 && rule.algorithm().canDelay()) {
            Decision decision = decide(rule.delaying(budget), key, cost);
            if (decision.allowed() && decision.delayNanos() > 0) {
                sleeper.sleep(decision.delayNanos());
            }
            return decision;
        }
        while (true) {
            Decision decision = decide(rule, key, cost);
            if (decision.allowed()) {
                if (decision.delayNanos() > 0) {
                    sleeper.sleep(decision.delayNanos());
                }
                return decision;
            }
            if (decision.never() || decision.retryAfterNanos() > budget) {
                return decision;
            }
            sleeper.sleep(decision.retryAfterNanos());
            budget -= decision.retryAfterNanos();
        }
    }

    /** {@link #acquire(String, long, Duration)} of cost 1. */
    public Decision acquire(String key, Duration maxWait) throws InterruptedException {
        return acquire(key, 1, maxWait);
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
        private Sleeper sleeper = Sleeper.system();
        private final List<DecisionListener> listeners = new ArrayList<>();

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

        /** How {@link RateLimiter#acquire} waits (default: the thread sleeps). */
        public Builder sleeper(Sleeper sleeper) {
            this.sleeper = sleeper;
            return this;
        }

        /** Adds a listener that hears every decision. */
        public Builder listener(DecisionListener listener) {
            listeners.add(listener);
            return this;
        }

        /**
         * @throws IllegalArgumentException naming what is wrong (no limit, burst for fixed-window, delay mode
         *                                  for sliding-log, a limit the store cannot decide ({@link Store#check}), ...)
         */
        public RateLimiter build() {
            Rule rule = Rule.of(algorithm, limits, mode, mode == Mode.DELAY ? maxDelayNanos : 0);
            Store decides = store == null ? new InMemoryStore() : store;
            decides.check(rule);
            return new RateLimiter(rule, decides, clock, sleeper, listeners.toArray(DecisionListener[]::new));
        }
    }
}
