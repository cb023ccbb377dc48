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
    /**
     * What {@link #acquire} with no time to wait decides by: {@link #rule} without its own delay mode, or in
     * shaping mode holding nothing.
     */
    private final Rule rejecting;
    /** The longest wait {@link #acquire} reserves for: what the rule and the store can keep exact. */
    private final long longestWait;
    /** The rule of the last {@code maxWait} {@link #acquire} reserved with (racy, and harmless: any is right). */
    private volatile Delaying lastDelaying;
    private final Store store;
    private final Clock clock;

    private final Sleeper sleeper;
    private final DecisionListener[] listeners;
    /**
     * The failures of listeners, by the listener's class, for the process: one a limiter let a limiter made anew for
     * each request (a way {@code RedisStore} supports) log a stack trace per decision again (the diff review).
     */
    private static final ClassValue<ListenerFailures> LISTENER_FAILURES = new ClassValue<>() {
        @Override
        protected ListenerFailures computeValue(Class<?> type) {
            return new ListenerFailures();
        }
    };

    private RateLimiter(Rule rule, Store store, Clock clock, Sleeper sleeper, DecisionListener[] listeners) {
        this.rule = rule;
        this.rejecting = rule.mode() == Mode.DELAY ? Rule.of(rule.algorithm(), rule.limits())
                : rule.mode() == Mode.SHAPING ? rule.delaying(0) : rule;
        this.longestWait = Math.min(rule.longestDelayNanos(), store.longestDelayNanos(rule));
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
        Decision decision = clock == null ? store.decide(applied, key, cost, Store.STORE_CLOCK)
                : store.decide(applied, key, cost, clock);
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
                LISTENER_FAILURES.get(listener.getClass()).failed(e);
            }
        }
    }

    /**
     * {@link #tryAcquire(String, long)} through a stage: for stores that do I/O, the thread is not held.
     *
     * <p>The stage may complete on the store's own thread, the one that reads its answers (the Redis store's):
     * work that blocks or takes long (a call to another service, a sleep, a {@code join()}) goes on an executor of
     * its own, {@code thenApplyAsync(work, executor)}, not {@code thenApply}. Done on that thread, it holds up every
     * other decision waiting for an answer there, and those pass their timeout and fall to the store's failure
     * policy (a review held other threads' decisions 5.7 s with a {@code thenApply} that slept).
     *
     * @throws IllegalArgumentException at once, for an empty key or a negative cost (what this limiter checks
     *                                  itself); what the store refuses or fails at (a key the Redis store cannot
     *                                  hold, a closed store) fails the stage instead
     */
    public CompletionStage<Decision> tryAcquireAsync(String key, long cost) {
        check(key, cost);
        CompletionStage<Decision> decision = clock == null ? store.decideAsync(rule, key, cost, Store.STORE_CLOCK)
                : store.decideAsync(rule, key, cost, clock);
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
     * <p>Token-bucket and gcra reserve the cost at once (delay mode with {@code max_delay = maxWait}, or the
     * rule's own max delay if shorter) and then sleep the delay: one decision, and the request keeps its place in
     * line. A {@code maxWait} of 0 never waits, whatever the rule's own delay mode. The other algorithms cannot
     * reserve; they sleep each rejection's {@code retry_after} and ask again while it ends within {@code maxWait}
     * of the call, on the limiter's clock (a last try after a sleep that ended late may be admitted that late).
     * In shaping mode (leaky-bucket) the delay of an admitted request is its place in the queue, and a request
     * is let into the queue only if that place is reached within {@code maxWait} (or the rule's own max delay, if
     * shorter); a full queue is waited on while the place it would give is still within what is left of
     * {@code maxWait}. A queue that drains past {@code maxWait} is not waited on: it drains only as fast as the
     * wait runs out.
     *
     * <p>Each decision is told to the listeners, so a call that waits out rejections is heard as each of them
     * and then its admission. A rejection the store makes of its own while reserving (Redis down and failing
     * closed, a full in-memory store that rejects new keys) is returned at once, as a rejection beyond
     * {@code maxWait} is: it cannot be told from one. Each {@code maxWait} is a rule of its own to the store (its
     * max delay), so on Redis calls with different {@code maxWait}s are not sent together: prefer a fixed one to a
     * deadline's remainder.
     *
     * @param maxWait how long the caller may wait. Token-bucket and gcra reserve for at most what the rule and the
     *                store keep exact: about 9 years in memory (less for interval refill of a great amount), 52
     *                days on Redis; a longer {@code maxWait} is the same as that
     * @return the decision: admitted once the wait is over, or rejected (nothing taken) when the wait would
     *         pass {@code maxWait}, its {@code retry_after} then the wait beyond {@code maxWait} (or beyond the
     *         rule's own max delay, when a delay-mode rule has a shorter one: after it, the same call is
     *         admitted), or when the cost can never fit
     * @throws InterruptedException if the thread is interrupted while waiting, or was already (then nothing is
     *                              decided); a cost already reserved is not given back
     */
    public Decision acquire(String key, long cost, Duration maxWait) throws InterruptedException {
        if (maxWait == null || maxWait.isNegative()) {
            throw new IllegalArgumentException("maxWait must be >= 0, got " + maxWait);
        }
        if (Thread.interrupted()) { // before reserving: the sleep would throw at once, the cost taken (a review found it)
            throw new InterruptedException("interrupted before acquiring");
        }
        long budget = Math.min(DurationFormat.saturatedNanos(maxWait), DurationFormat.MAX_NANOS);
        if (budget > 0 && rule.algorithm().canDelay()) {
            // reserving: for at most what the rule and the store can keep exact (the retry loop below reserves
            // nothing, so it waits any maxWait out)
            Decision decision = decide(delaying(Math.min(budget, longestWait)), key, cost);
            if (decision.allowed() && decision.delayNanos() > 0) {
                hold(key, cost, decision);
            }
            return decision;
        }
        // the budget is what is left of maxWait on the clock, not maxWait less the waits asked for: a sleep ends
        // late, and the lateness added up (a bug found by trying the library: 242 ms of a 200 ms maxWait)
        Clock waiting = clock != null ? clock : Clock.system();
        long deadline = waiting.nanos() + budget; // a time of at most 2^62 and a budget of at most 2^58
        boolean shaping = rule.mode() == Mode.SHAPING;
        long asked = budget;
        while (true) {
            Decision decision = decide(budget == 0 ? rejecting : shaping ? delaying(holding(budget, asked)) : rule,
                    key, cost);
            if (decision.allowed()) {
                if (decision.delayNanos() > 0) {
                    hold(key, cost, decision);
                }
                return decision;
            }
            // a shaping queue whose turn is past what is left (its reset_after: the queue drains as the wait runs
            // out) never comes within it, however long one waits; one whose turn is within it is waited on for room
            long beyond = (shaping ? decision.resetAfterNanos() : decision.retryAfterNanos()) - budget;
            if (decision.never() || beyond > 0 || decision.retryAfterNanos() > budget) {
                return budget == 0 || decision.never() ? decision : new Decision(false, decision.remaining(), beyond,
                        decision.resetAfterNanos(), 0, decision.limit(), decision.limitResetAfterNanos(),
                        decision.storeFailed());
            }
            sleeper.sleep(decision.retryAfterNanos());
            // less the wait asked for too: a clock that the sleep does not move (a manual one, a test's) must not make
            // the same rejection come back for ever (a review found it)
            budget = Math.max(0, Math.min(budget - decision.retryAfterNanos(), deadline - waiting.nanos()));
        }
    }

    /** Holds an admitted request for its delay; interrupted, it is abandoned, and the listeners hear it. */
    private void hold(String key, long cost, Decision decision) throws InterruptedException {
        try {
            sleeper.sleep(decision.delayNanos());
        } catch (InterruptedException e) {
            for (DecisionListener listener : listeners) {
                try {
                    listener.abandoned(key, cost, decision);
                } catch (RuntimeException failed) {
                    LISTENER_FAILURES.get(listener.getClass()).failed(failed);
                }
            }
            throw e;
        }
    }

    /**
     * The longest a shaping queue may hold a request with {@code budget} left of {@code asked}: all of it at the
     * first decision, and after a wait for room what is left, rounded down to a 64th of {@code asked}. A store keeps
     * what it works out per rule (below), and a rule for each nanosecond left would be a new one at every wait (a
     * review counted 202 rules in 200 calls); rounded, a {@code maxWait} makes 66 at most ({@code asked} itself and
     * the 65 multiples of its 64th). A turn within what rounding took off is rejected once more, its retry_after
     * slept, and then admitted: never held past {@code maxWait}.
     */
    private long holding(long budget, long asked) {
        long step = Math.max(1, asked / 64);
        return Math.min(budget == asked ? budget : budget - budget % step, longestWait);
    }

    /**
     * {@link Rule#delaying} of {@code budget}, the same object while callers keep asking with one {@code maxWait}:
     * a store keeps what it works out per rule (the Redis store its calls and remembered rejections), and a new rule
     * a call would fill and churn that (a bug pinned in RateLimiterFacesTest).
     */
    private Rule delaying(long budget) {
        Delaying last = lastDelaying;
        if (last != null && last.budget() == budget) {
            return last.rule();
        }
        Rule made = rule.delaying(budget);
        lastDelaying = new Delaying(budget, made);
        return made;
    }

    private record Delaying(long budget, Rule rule) {
    }

    /** {@link #acquire(String, long, Duration)} of cost 1. */
    public Decision acquire(String key, Duration maxWait) throws InterruptedException {
        return acquire(key, 1, maxWait);
    }

    /**
     * Forgets everything about {@code key}: its next decision finds it untouched. On Redis, other processes that
     * remember a rejection of it ({@code RedisStore}'s rejections remembered, on by default) go on answering it
     * rejected until that rejection's {@code retry_after}; build their stores with {@code rememberRejections(false)}
     * where keys are reset.
     */
    public void reset(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
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
            if (limit == null) {
                throw new IllegalArgumentException("limit must not be null");
            }
            limits.add(limit);
            return this;
        }

        /** Adds a limit written as {@code 600/1m} (see {@link Limit#parse}). */
        public Builder limit(String limit) {
            return limit(Limit.parse(limit));
        }

        /**
         * Reject (the default), or shaping for leaky-bucket (a queue as long as its burst, with no max delay: for
         * one, {@link #rule} a {@code Rule.of(..., Mode.SHAPING, maxDelay)}). For delay mode use {@link #delay}.
         */
        public Builder mode(Mode mode) {
            if (mode != this.mode) {
                this.maxDelayNanos = mode == Mode.SHAPING ? Rule.NO_MAX_DELAY : 0;
            }
            this.mode = mode;
            return this;
        }

        /** Delay mode: a request that fits within {@code maxDelay} is admitted with a delay instead of rejected. */
        public Builder delay(Duration maxDelay) {
            if (maxDelay == null) {
                throw new IllegalArgumentException("delay mode needs a max delay, got null");
            }
            this.mode = Mode.DELAY;
            this.maxDelayNanos = DurationFormat.saturatedNanos(maxDelay);
            return this;
        }

        /** The algorithm, limits and mode of {@code rule}, replacing any chosen before. */
        public Builder rule(Rule rule) {
            if (rule == null) {
                throw new IllegalArgumentException("rule must not be null");
            }
            this.algorithm = rule.algorithm();
            this.limits.clear();
            this.limits.addAll(rule.limits());
            this.mode = rule.mode();
            this.maxDelayNanos = rule.maxDelayNanos();
            return this;
        }

        /**
         * Where keys live (default: a new {@link InMemoryStore}). A store keeps one state per key, read as the state
         * of whichever rule decides it: a limiter whose rule changes (its limits or algorithm, at a deploy) on a store
         * that outlives it (Redis) gives the new rule a namespace of its own, or finds what the old rule left.
         *
         * @throws IllegalArgumentException for null, as the builder's other parts: a store that is not there (a
         *                                  bean not made) was a private in-memory one, each process limiting alone
         */
        public Builder store(Store store) {
            if (store == null) {
                throw new IllegalArgumentException("store must not be null");
            }
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
            if (sleeper == null) {
                throw new IllegalArgumentException("sleeper must not be null");
            }
            this.sleeper = sleeper;
            return this;
        }

        /** Adds a listener that hears every decision. */
        public Builder listener(DecisionListener listener) {
            if (listener == null) {
                throw new IllegalArgumentException("listener must not be null");
            }
            listeners.add(listener);
            return this;
        }

        /**
         * @throws IllegalArgumentException naming what is wrong (no limit, burst for fixed-window, delay mode
         *                                  for sliding-log, a limit the store cannot decide ({@link Store#check}), ...)
         */
        public RateLimiter build() {
            Rule rule = Rule.of(algorithm, limits, mode, mode == Mode.DELAY || mode == Mode.SHAPING ? maxDelayNanos : 0);
            Store decides = store == null ? new InMemoryStore() : store;
            decides.check(rule);
            return new RateLimiter(rule, decides, clock, sleeper, listeners.toArray(DecisionListener[]::new));
        }
    }
}
