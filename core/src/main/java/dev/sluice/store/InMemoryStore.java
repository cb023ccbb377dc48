package dev.sluice.store;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.algorithm.KeyState;
import dev.sluice.algorithm.Outcome;
import dev.sluice.algorithm.Rule;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The built-in store: the state of every key in this JVM's heap.
 *
 * <h2>One compare-and-set per decision</h2>
 * Each key has a slot holding its immutable {@link KeyState}. A decision reads the state, computes the
 * outcome with the pure {@link Rule#decide}, and installs the new state with one compare-and-set; if another
 * thread got there first it decides again on the newer state. No lock is held and no decision is lost, so
 * any number of threads on one key admit exactly what the algorithm allows. A rejection or a peek changes
 * nothing and writes nothing.
 *
 * <h2>Dropping untouched keys</h2>
 * A state knows when it will be untouched again ({@link KeyState#expiresAt()}); from then on it can be
 * dropped without changing any decision. Dropping races with deciding: a thread could install a new state
 * in a slot that is being removed from the map, and its admission would be forgotten. So a slot is retired
 * in two steps: first its state is swapped for a tombstone with a compare-and-set (which fails if a decision
 * got in first), then the slot leaves the map; a thread that meets a tombstone helps remove it and starts
 * over with a fresh slot. Expired keys are swept out now and then by the thread that inserts a key, after
 * a number of insertions proportional to the size of the map, so sweeping costs O(1) per insertion.
 *
 * <h2>A maximum key count</h2>
 * The store holds at most {@code maxKeys} keys (default {@value #DEFAULT_MAX_KEYS}). When a new key finds it
 * full, the store sweeps expired keys at once; if it is still full, the request is answered as
 * {@link WhenFull} says: rejected (the default) or admitted without being stored. Known keys are never
 * evicted, so a flood of new keys can neither exhaust the heap nor reset the limits of existing ones.
 */
public final class InMemoryStore implements Store {
    public static final long DEFAULT_MAX_KEYS = 1_000_000;
    private static final long MIN_INSERTS_BETWEEN_SWEEPS = 1024;

    /** Stands in a retired slot: whoever meets it removes the slot and starts again. */
    private static final Object RETIRED = new Object();

    /** One key's place in the map. Extends its reference to save an object per key. */
    @SuppressWarnings("serial")
    private static final class Slot extends AtomicReference<Object> {
        Slot(KeyState state) {
            super(state);
        }
    }

    private final ConcurrentHashMap<String, Slot> slots = new ConcurrentHashMap<>();
    private final AtomicLong size = new AtomicLong();
    private final AtomicLong inserts = new AtomicLong();
    /** No stored key expires before this (states only ever expire later after a decision). */
    private final AtomicLong firstExpiry = new AtomicLong(Long.MAX_VALUE);
    private final ReentrantLock sweeping = new ReentrantLock();
    private volatile long nextSweepAt = MIN_INSERTS_BETWEEN_SWEEPS;
    private final long maxKeys;
    private final WhenFull whenFull;
    private final Clock clock;

    private InMemoryStore(Builder builder) {
        this.maxKeys = builder.maxKeys;
        this.whenFull = builder.whenFull;
        this.clock = builder.clock;
    }

    /** A store on the system clock, with at most {@value #DEFAULT_MAX_KEYS} keys, rejecting new keys when full. */
    public InMemoryStore() {
        this(builder());
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        long now = nowNanos == STORE_CLOCK ? clock.nanos() : nowNanos;
        while (true) {
            Slot slot = slots.get(key);
            if (slot == null) {
                Outcome outcome = rule.decide(null, now, cost);
                if (outcome.next() == null) {
                    return outcome.decision();
                }
                Decision inserted = insert(key, outcome, now);
                if (inserted != null) {
                    return inserted;
                }
                continue;
            }
            Object current = slot.get();
            if (current == RETIRED) {
                slots.remove(key, slot);
                continue;
            }
            KeyState state = (KeyState) current;
            Outcome outcome = rule.decide(state, now, cost);
            KeyState next = outcome.next();
            if (next == state) {
                return outcome.decision();
            }
            if (next == null ? retire(key, slot, state) : slot.compareAndSet(state, next)) {
                return outcome.decision();
            }
        }
    }

    /** Puts a new key in; {@code null} if another thread put it in first (decide again on its state). */
    private Decision insert(String key, Outcome outcome, long now) {
        if (!reserveRoom(now)) {
            return whenFull == WhenFull.ADMIT ? outcome.decision() : full(outcome, now);
        }
        if (slots.putIfAbsent(key, new Slot(outcome.next())) != null) {
            size.decrementAndGet();
            return null;
        }
        long expiresAt = outcome.next().expiresAt();
        if (expiresAt < firstExpiry.get()) {
            firstExpiry.accumulateAndGet(expiresAt, Math::min);
        }
        if (inserts.incrementAndGet() >= nextSweepAt && sweeping.tryLock()) {
            try {
                sweep(now);
            } finally {
                sweeping.unlock();
            }
        }
        return outcome.decision();
    }

    private boolean reserveRoom(long now) {
        while (true) {
            long keys = size.get();
            if (keys < maxKeys) {
                if (size.compareAndSet(keys, keys + 1)) {
                    return true;
                }
                continue;
            }
            if (now < firstExpiry.get()) {
                return false; // nothing can be dropped yet
            }
            sweeping.lock();
            try {
                if (size.get() >= maxKeys && now >= firstExpiry.get()) {
                    sweep(now);
                }
                if (size.get() >= maxKeys) {
                    return false;
                }
            } finally {
                sweeping.unlock();
            }
        }
    }

    /** The rejection of a new key when the store is full: retry once the first stored key expires. */
    private Decision full(Outcome outcome, long now) {
        long retryAfter = Math.max(1, firstExpiry.get() - now);
        return new Decision(false, 0, retryAfter, 0, 0, outcome.decision().limit());
    }

    /** Drops every key that is untouched at {@code now}. Holds {@link #sweeping}. */
    private void sweep(long now) {
        long first = Long.MAX_VALUE;
        for (Map.Entry<String, Slot> entry : slots.entrySet()) {
            Object state = entry.getValue().get();
            if (state == RETIRED) {
                continue;
            }
            KeyState keyState = (KeyState) state;
            if (!keyState.expired(now) || !retire(entry.getKey(), entry.getValue(), keyState)) {
                first = Math.min(first, keyState.expiresAt());
            }
        }
        firstExpiry.set(first);
        nextSweepAt = inserts.get() + Math.max(MIN_INSERTS_BETWEEN_SWEEPS, size.get());
    }

    /** Takes a slot out of the map if it still holds {@code state}; false if a decision changed it first. */
    private boolean retire(String key, Slot slot, KeyState state) {
        if (!slot.compareAndSet(state, RETIRED)) {
            return false;
        }
        slots.remove(key, slot);
        size.decrementAndGet();
        return true;
    }

    @Override
    public void reset(Rule rule, String key) {
        Slot slot = slots.get(key);
        if (slot == null) {
            return;
        }
        while (true) {
            Object state = slot.get();
            if (state == RETIRED || retire(key, slot, (KeyState) state)) {
                return;
            }
        }
    }

    /** Drops every key that is untouched now, on the store's clock. */
    public void cleanUp() {
        cleanUp(clock.nanos());
    }

    /** Drops every key that is untouched at {@code nowNanos}. */
    public void cleanUp(long nowNanos) {
        sweeping.lock();
        try {
            sweep(nowNanos);
        } finally {
            sweeping.unlock();
        }
    }

    /** The number of keys held. */
    public long size() {
        return size.get();
    }

    public long maxKeys() {
        return maxKeys;
    }

    /** Settings of an {@link InMemoryStore}. */
    public static final class Builder {
        private long maxKeys = DEFAULT_MAX_KEYS;
        private WhenFull whenFull = WhenFull.REJECT;
        private Clock clock = Clock.system();

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

        /** What a new key gets when the store is full (default {@link WhenFull#REJECT}). */
        public Builder whenFull(WhenFull whenFull) {
            if (whenFull == null) {
                throw new IllegalArgumentException("whenFull must be REJECT or ADMIT, got null");
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
