package dev.sluice.store;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.algorithm.KeyState;
import dev.sluice.algorithm.Rule;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The built-in store: the state of every key in this JVM's heap.
 *
 * <h2>One compare-and-set per decision</h2>
 * Each key's state is an immutable {@link KeyState}. A decision reads it, computes the outcome with the
 * pure {@link Rule#decide}, and installs the new state with one compare-and-set; if another thread got there
 * first it decides again on the newer state. No lock is held and no decision is lost, so any number of
 * threads on one key admit exactly what the algorithm allows. A rejection or a peek writes nothing. The keys
 * live in a {@link KeyTable}, an open-addressing table built for this (its comment tells how it stays
 * correct while keys come and go and the table grows).
 *
 * <h2>Dropping untouched keys</h2>
 * A state knows when it will be untouched again ({@link KeyState#expiresAt()}); from then on it can be
 * dropped without changing any decision. Expired keys are dropped when the table of keys is crowded, by the
 * thread whose new key found it so, just before the table is resized for the keys left: the number of keys
 * held stays within a constant factor of the live ones, and dropping costs O(1) per insertion.
 *
 * <p>"Expired" is judged at the time of the request that sweeps, which is not the time of the next request
 * on every other key. When times only go forward (the store's clock, a limiter's clock, {@code simulate}'s
 * ordered traces) that does not matter, as long as a clock is read once the key has been found: a reading taken
 * before, on a thread that is then descheduled while another sweeps at a later reading, is earlier than the
 * sweep's (so the store reads its own clock and a limiter's after the lookup: {@link #decide(Rule, String, long,
 * Clock)}). But a replay whose requests may come stamped earlier than one
 * already decided on another key would find a key dropped because it had expired by the later time, fresh
 * where its state still counts (a bug a random trace found: a sliding window admitted as if its previous
 * window were empty). For such replays, {@link Builder#outOfOrder} keeps expired keys that much longer for
 * decisions at a time passed in (the Redis store keeps such keys an hour past their reset); by default
 * nothing is kept, so a store fed a monotonic clock's times frees its keys at once. (A full store's
 * {@code retry_after} counts to when the first key can be dropped.)
 *
 * <h2>A maximum key count</h2>
 * The store holds at most {@code maxKeys} keys (default {@value #DEFAULT_MAX_KEYS}). When a new key finds it
 * full, it does as {@link WhenFull} says: drops expired keys and evicts keys among the least recently decided,
 * a few at a time, and stores the new one (the default; see {@link Eviction#evictLeastRecent}); or sweeps the
 * table for expired keys (if any can have expired) and, if it is still full, rejects the request, or admits it
 * without storing the key.
 *
 * <p>Why evict by default. Rejecting kept every known key exact, but a client that sent a new key with each
 * request, under limits of a day, filled a million keys in seconds, and then every new client was rejected for a
 * day (found by attacking the server). An evicted key loses its state, so it may be admitted more than its
 * limit allows when it comes back; eviction takes the keys idle longest, which a flood of one-time keys soon
 * makes its own, while keys in use stay. nginx's {@code limit_req} does the same. Both answers are counted:
 * {@link #evicted()}, {@link #turnedAway()}.
 */
public final class InMemoryStore implements Store {
    public static final long DEFAULT_MAX_KEYS = 1_000_000;

    private final KeyTable keys;
    private final long maxKeys;
    private final WhenFull whenFull;
    private final Clock clock;
    private final long outOfOrderNanos;
    /** New keys the store had no room for, rejected or admitted without being stored. */
    private final java.util.concurrent.atomic.LongAdder turnedAway = new java.util.concurrent.atomic.LongAdder();

    private InMemoryStore(Builder builder) {
        this.outOfOrderNanos = builder.outOfOrderNanos;
        this.maxKeys = builder.maxKeys;
        this.whenFull = builder.whenFull;
        this.clock = builder.clock;
        this.keys = new KeyTable(maxKeys);
    }

    /**
     * A store on the system clock, with at most {@value #DEFAULT_MAX_KEYS} keys, evicting those least recently
     * decided when full.
     */
    public InMemoryStore() {
        this(builder());
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        boolean ownClock = nowNanos == STORE_CLOCK;
        // how long before its time a sweep this decision makes judges keys expired (see "Dropping untouched keys")
        return decide(rule, key, cost, ownClock ? clock : null, nowNanos, ownClock ? 0 : outOfOrderNanos);
    }

    /** On a limiter's clock, read once the key is found, as the store's own is: times that only go forward. */
    @Override
    public Decision decide(Rule rule, String key, long cost, Clock clock) {
        return decide(rule, key, cost, clock, STORE_CLOCK, 0);
    }

    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, Clock clock) {
        try {
            return CompletableFuture.completedFuture(decide(rule, key, cost, clock));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Decides at {@code nowNanos}, or, when {@code decidingClock} is given, at its reading once the key has been
     * found (or found absent).
     */
    private Decision decide(Rule rule, String key, long cost, Clock decidingClock, long nowNanos, long grace) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        Decision decision = keys.decide(rule, key, cost, decidingClock, nowNanos, grace);
        if (decision != null) {
            return decision;
        }
        while (true) { // a new key found the store full
            long now = decidingClock != null ? decidingClock.nanos() : nowNanos;
            if (whenFull == WhenFull.EVICT) {
                // expired keys the eviction meets go first; no sweep of the whole table (see Eviction)
                if (keys.evictLeastRecent(now, now - grace) == 0 && keys.size() >= maxKeys) {
                    Thread.yield(); // what it would evict was being decided: another thread will make room, or it will
                }
            } else if (!keys.makeRoom(now - grace)) {
                return full(rule, cost, now, now - grace);
            }
            decision = keys.decide(rule, key, cost, decidingClock, nowNanos, grace);
            if (decision != null) {
                return decision;
            }
            if (whenFull != WhenFull.EVICT) {
                return full(rule, cost, now, now - grace);
            }
        }
    }

    /** The answer for a new key when the store is full and does not evict. */
    private Decision full(Rule rule, long cost, long now, long sweepAt) {
        turnedAway.increment();
        if (whenFull == WhenFull.ADMIT) {
            return rule.decide(null, now, cost).decision();
        }
        long retryAfter = Math.max(1, keys.firstExpiry() - sweepAt);
        return new Decision(false, 0, retryAfter, 0, 0, rule.limits().get(0));
    }

    @Override
    public void reset(Rule rule, String key) {
        keys.remove(key);
    }

    /**
     * Drops every key that is untouched now, on the store's clock. A store whose limiters decide on clocks of their
     * own (a {@code ManualClock}, a trace's time) is cleaned up with {@link #cleanUp(long)} at their time: on the
     * store's clock, keys still counting at theirs would be dropped, and their next requests admitted afresh.
     */
    public void cleanUp() {
        cleanUp(clock.nanos());
    }

    /** Drops every key that is untouched at {@code nowNanos}. */
    public void cleanUp(long nowNanos) {
        keys.cleanUp(nowNanos);
    }

    /** The number of keys held. */
    public long size() {
        return keys.size();
    }

    public long maxKeys() {
        return maxKeys;
    }

    /**
     * How many decisions found the store full, for a new key, and were rejected or admitted without storing it
     * ({@link WhenFull#REJECT}, {@link WhenFull#ADMIT}): what a server counts and alerts on, since a store filled
     * with keys that live long (a client sending a new key a request, under a limit of a day) answers every new key
     * so until they expire (found by attacking the server).
     */
    public long turnedAway() {
        return turnedAway.sum();
    }

    /** How many keys were evicted to make room for new ones ({@link WhenFull#EVICT}): each lost its state. */
    public long evicted() {
        return keys.evicted();
    }

    /** Settings of an {@link InMemoryStore}. */
    public static final class Builder {
        private long maxKeys = DEFAULT_MAX_KEYS;
        private WhenFull whenFull = WhenFull.EVICT;
        private Clock clock = Clock.system();
        private long outOfOrderNanos;

        private Builder() {
        }

        /** At most this many keys at once (default {@value InMemoryStore#DEFAULT_MAX_KEYS}). */
        public Builder maxKeys(long maxKeys) {
            if (maxKeys < 1) {
                throw new IllegalArgumentException("maxKeys must be >= 1, got " + maxKeys);
            }
            this.maxKeys = maxKeys;
            return this;
        }

        /**
         * For replays of traces whose requests may be stamped up to {@code skew} earlier than one already decided
         * on another key: decisions at a time passed in keep an expired key that much longer, so such a request
         * still finds the state that counts at its time (default zero: times only go forward).
         */
        public Builder outOfOrder(Duration skew) {
            if (skew == null) {
                throw new IllegalArgumentException("out-of-order skew must not be null");
            }
            if (skew.isNegative() || DurationFormat.saturatedNanos(skew) > DurationFormat.MAX_NANOS) {
                throw new IllegalArgumentException("out-of-order skew must be >= 0 and at most "
                        + DurationFormat.LONGEST
                        + ", got " + skew);
            }
            this.outOfOrderNanos = DurationFormat.saturatedNanos(skew);
            return this;
        }

        /** What a new key gets when the store is full (default {@link WhenFull#EVICT}). */
        public Builder whenFull(WhenFull whenFull) {
            if (whenFull == null) {
                throw new IllegalArgumentException("whenFull must be EVICT, REJECT or ADMIT, got null");
            }
            this.whenFull = whenFull;
            return this;
        }

        /** The store's own clock, used when a limiter has none (default {@link Clock#system()}). */
        public Builder clock(Clock clock) {
            if (clock == null) {
                throw new IllegalArgumentException("clock must not be null");
            }
            this.clock = clock;
            return this;
        }

        public InMemoryStore build() {
            return new InMemoryStore(this);
        }
    }
}
