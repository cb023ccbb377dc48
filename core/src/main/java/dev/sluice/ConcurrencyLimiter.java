package dev.sluice;

import dev.sluice.algorithm.Rule;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The concurrency limit of docs/algorithms.md: at most {@code L} units of cost in flight per key.
 * {@link #tryAcquire} admits iff {@code in_flight + c ≤ L} and hands out a {@link Permit}; closing the permit
 * gives the cost back. A permit that is never closed (its holder crashed, or forgot) expires after the lease
 * timeout, so capacity cannot leak.
 *
 * <p>Not a rate: nothing here refills with time except expiring leases. Per key the leases are kept in the order
 * they expire (they all last the same, so in the order taken), with their sum, and changed only under the key's
 * lock ({@link ConcurrentHashMap#compute}, held for the update; acquire and release pair with real work, far
 * longer). Taking, giving back and expiring a lease cost O(log n) in the key's leases: they were arrays copied
 * whole at each change, and a key of tens of thousands of places (a gateway's one limit for all) spent a
 * millisecond a request copying them, under its lock. A key with no lease left is removed. A key whose leases expire unreleased, never to be asked again, is removed by a sweep of every
 * key, made once the number of keys has doubled since the last: a client sending a new key with each request, and
 * never releasing, grew the map without end (a review found it); the sweeps cost each acquisition O(1) amortised.
 *
 * <p>And it holds at most {@code maxPlaces} leases at once, over all keys (default {@value #DEFAULT_MAX_PLACES}); a
 * key with none is not kept, so this bounds the keys too. Full, it turns new leases away ({@link Permit#turnedAway()}),
 * rejected with the wait until the first lease it holds expires, as nginx's {@code limit_conn} answers 503 when its
 * zone is full. Why: sweeps drop expired leases only, and leases live a lease timeout; a client sending a new key
 * with each request and never releasing held a lease a key, each about 460 bytes with the server's id for it, and
 * ran a server of 256 MB out of memory in a few minutes (a review found it). Not evicted, as the in-memory store's
 * keys are: a lease dropped early would let its key hold more than its limit. Full, it sweeps again no sooner than
 * the first expiry it saw, nor than a tenth of a second after its last sweep, so a flood of new keys does not walk
 * every key for each one.
 */
public final class ConcurrencyLimiter {
    /** The most leases held at once, over all keys, unless told otherwise. */
    public static final long DEFAULT_MAX_PLACES = 100_000;

    private final long limit;
    private final long leaseTimeout;
    private final long maxPlaces;
    /** Leases held, expired ones not yet dropped among them. */
    private final AtomicLong places = new AtomicLong();
    /**
     * When a full limiter may sweep for room again (on the clock's time): the first expiry of the leases the last
     * sweep left, or of a lease granted since if it left none, and no sooner than {@link #ROOM_SWEEP_GAP} after it.
     */
    private volatile long nextRoomSweep = Long.MIN_VALUE;
    /**
     * The least time between two sweeps for room: each walks every key, on the caller's thread (a server's event
     * loop), and a flood of new keys under leases expiring one after the other had one due at each expiry (a review
     * measured calls of 21 ms).
     */
    static final long ROOM_SWEEP_GAP = 100_000_000L;
    private final java.util.concurrent.atomic.LongAdder turnedAway = new java.util.concurrent.atomic.LongAdder();
    private final Clock clock;
    private final Limit described;
    private final ConcurrentHashMap<String, Leases> keys = new ConcurrentHashMap<>();
    private final AtomicLong leaseIds = new AtomicLong();
    /** The number of keys at which the next sweep is made ({@link Long#MAX_VALUE} while one is being made). */
    private final AtomicLong sweepAt = new AtomicLong(SWEEP_FROM);
    private static final long SWEEP_FROM = 1_024;

    /**
     * The leases of one key by id, which is taken under the key's lock, so in the order of expiry; and the cost they
     * hold. Changed and read under the key's lock only.
     */
    private static final class Leases {
        private final TreeMap<Long, Lease> byId = new TreeMap<>();
        private long inFlight;

        private record Lease(long cost, long expiry) {
        }

        int size() {
            return byId.size();
        }

        long inFlight() {
            return inFlight;
        }

        void add(long id, long cost, long expiry) {
            byId.put(id, new Lease(cost, expiry));
            inFlight += cost;
        }

        /** Drops lease {@code id} if held; how many leases went (0 or 1). */
        int remove(long id) {
            Lease gone = byId.remove(id);
            if (gone == null) {
                return 0;
            }
            inFlight -= gone.cost;
            return 1;
        }

        /** Drops the leases expired by {@code now}; how many went. */
        int dropExpired(long now) {
            int dropped = 0;
            for (Map.Entry<Long, Lease> first; (first = byId.firstEntry()) != null && first.getValue().expiry <= now; ) {
                byId.pollFirstEntry();
                inFlight -= first.getValue().cost;
                dropped++;
            }
            return dropped;
        }

        long firstExpiry() {
            return byId.firstEntry().getValue().expiry;
        }

        /** The wait from {@code now} until the last lease expires; 0 with none. */
        long resetAfter(long now) {
            return byId.isEmpty() ? 0 : byId.lastEntry().getValue().expiry - now;
        }

        /** The wait until enough leases have expired for {@code cost} to fit within {@code limit}, none released first. */
        long retryAfter(long now, long cost, long limit) {
            long left = inFlight;
            for (Lease lease : byId.values()) { // oldest first: as many as must go, no more
                left -= lease.cost;
                if (left + cost <= limit) {
                    return lease.expiry - now;
                }
            }
            throw new AssertionError("a cost within the limit fits once every lease has expired");
        }
    }

    private ConcurrencyLimiter(Builder builder) {
        this.limit = builder.limit;
        this.leaseTimeout = builder.leaseTimeout;
        this.maxPlaces = builder.maxPlaces;
        this.clock = builder.clock;
        this.described = Limit.of(limit, leaseTimeout);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Asks for one unit of in-flight capacity on {@code key}. */
    public Permit tryAcquire(String key) {
        return tryAcquire(key, 1);
    }

    /**
     * Asks for {@code cost} units of in-flight capacity on {@code key}. A cost of 0 is a peek (docs/algorithms.md):
     * allowed, with what is free now and when the leases held run out, and nothing held (closing its permit gives
     * nothing back).
     *
     * @throws IllegalArgumentException for an empty key or a negative cost
     */
    public Permit tryAcquire(String key, long cost) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
        Permit permit = attempt(key, cost);
        if (permit.turnedAway()) { // full: leases may have expired since the last sweep
            if (clock.nanos() >= nextRoomSweep && sweep(true)) {
                permit = attempt(key, cost);
            }
            if (permit.turnedAway()) {
                turnedAway.increment();
            }
        } else if (keys.size() >= sweepAt.get()) {
            sweep(false);
        }
        return permit;
    }

    private Permit attempt(String key, long cost) {
        Permit[] answer = new Permit[1]; // the permit is made under the key's lock, where its lease is taken
        keys.compute(key, (k, held) -> {
            long now = clock.nanos(); // read under the key's lock, so expiries stay in order
            // within the time a rule decides at: past it, now + the lease overflowed, and every lease expired at once
            Rule.checkTime(now);
            Leases live = held == null ? new Leases() : held;
            places.addAndGet(-live.dropExpired(now));
            long inFlight = live.inFlight();
            long reset = live.resetAfter(now); // the grant below moves it to its own lease's end
            if (cost == 0) {
                answer[0] = holdingNothing(key, new Decision(true, limit - inFlight, 0, reset, 0, described), false);
            } else if (cost > limit || inFlight + cost > limit) {
                long retryAfter = cost > limit ? Decision.NEVER : live.retryAfter(now, cost, limit);
                answer[0] = holdingNothing(key, new Decision(false, limit - inFlight, retryAfter, reset, 0, described),
                        false);
            } else if (places.incrementAndGet() > maxPlaces) {
                places.decrementAndGet();
                // nothing left for this key either, whatever its own limit leaves: 0, as a full store answers
                long next = nextRoomSweep; // at or before now: a sweep is due, by another caller or this one's retry
                long wait = next > now ? next - now : 1;
                answer[0] = holdingNothing(key, new Decision(false, 0, wait, reset, 0, described), true);
            } else {
                long id = leaseIds.incrementAndGet(); // under the lock: a key's ids follow its expiries
                live.add(id, cost, now + leaseTimeout);
                answer[0] = new Permit(this, key, id, new Decision(true, limit - inFlight - cost, 0,
                        live.resetAfter(now), 0, described), false);
            }
            return live.size() == 0 ? null : live;
        });
        return answer[0];
    }

    /** A permit holding no lease: a refusal, or a peek (cost 0); {@code full}: turned away for the limiter's room. */
    private Permit holdingNothing(String key, Decision decision, boolean full) {
        return new Permit(this, key, 0, decision, full);
    }

    /**
     * Drops the expired leases of every key, and the keys left with none, and notes the first expiry of those left;
     * by one caller at a time. A sweep for room ({@code full}) is made whatever the number of keys.
     *
     * @return whether this caller made it
     */
    private boolean sweep(boolean full) {
        long at = sweepAt.get();
        if (at == Long.MAX_VALUE || (!full && keys.size() < at) || !sweepAt.compareAndSet(at, Long.MAX_VALUE)) {
            return false;
        }
        try {
            long now = clock.nanos();
            long[] first = {Long.MAX_VALUE};
            for (String key : keys.keySet()) {
                keys.computeIfPresent(key, (k, held) -> {
                    places.addAndGet(-held.dropExpired(now));
                    if (held.size() > 0) {
                        first[0] = Math.min(first[0], held.firstExpiry());
                    }
                    return held.size() == 0 ? null : held;
                });
            }
            // none left: a lease granted from now expires a lease timeout on at the soonest (a review found the
            // limiter, swept empty, never sweeping again, full for good with a retry_after of 292 years)
            nextRoomSweep = Math.max(Math.min(first[0], now + leaseTimeout), now + ROOM_SWEEP_GAP);
        } finally {
            sweepAt.set(Math.max(SWEEP_FROM, 2L * keys.size()));
        }
        return true;
    }

    void release(String key, long lease) {
        long now = clock.nanos();
        Rule.checkTime(now);
        keys.computeIfPresent(key, (k, held) -> {
            places.addAndGet(-held.remove(lease) - held.dropExpired(now));
            return held.size() == 0 ? null : held;
        });
    }

    /** Units of cost in flight on {@code key} now. */
    public long inFlight(String key) {
        if (key == null) {
            throw new IllegalArgumentException("key must not be null");
        }
        if (key.isEmpty()) { // as tryAcquire: no key is empty (it answered 0, as for a key unknown: a review)
            throw new IllegalArgumentException("key must not be empty");
        }
        long now = clock.nanos();
        Rule.checkTime(now);
        long[] inFlight = new long[1];
        keys.computeIfPresent(key, (k, held) -> { // under the key's lock, where its leases change
            places.addAndGet(-held.dropExpired(now));
            inFlight[0] = held.inFlight();
            return held.size() == 0 ? null : held;
        });
        return inFlight[0];
    }

    /** How many keys hold a lease (expired leases are dropped as their keys are touched, and by the sweeps). */
    public int keyCount() {
        return keys.size();
    }

    /** How many leases are held, over all keys (expired ones among them until dropped). */
    public long placeCount() {
        return places.get();
    }

    /** The most leases held at once, over all keys. */
    public long maxPlaces() {
        return maxPlaces;
    }

    /** How many acquisitions were turned away because the limiter held its most leases ({@link Permit#turnedAway()}). */
    public long turnedAway() {
        return turnedAway.sum();
    }

    /** The limit and the lease timeout of a {@link ConcurrencyLimiter}. */
    public static final class Builder {
        private long limit;
        private long leaseTimeout = Duration.ofMinutes(1).toNanos();
        private long maxPlaces = DEFAULT_MAX_PLACES;
        private Clock clock = Clock.system();

        private Builder() {
        }

        /** At most this many units of cost in flight per key. */
        public Builder limit(long maxInFlight) {
            this.limit = maxInFlight;
            return this;
        }

        /** How long a permit holds its capacity if it is never closed (default 1 minute). */
        public Builder leaseTimeout(Duration timeout) {
            if (timeout == null) {
                throw new IllegalArgumentException("lease timeout must not be null");
            }
            this.leaseTimeout = DurationFormat.saturatedNanos(timeout);
            return this;
        }

        /**
         * At most this many leases held at once, over all keys (default {@value ConcurrencyLimiter#DEFAULT_MAX_PLACES});
         * full, new ones are turned away. Each takes about 200 bytes of heap, with its key.
         */
        public Builder maxPlaces(long maxPlaces) {
            this.maxPlaces = maxPlaces;
            return this;
        }

        public Builder clock(Clock clock) {
            if (clock == null) {
                throw new IllegalArgumentException("clock must not be null");
            }
            this.clock = clock;
            return this;
        }

        public ConcurrencyLimiter build() {
            if (limit < 1 || limit > Limit.MAX_AMOUNT) {
                throw new IllegalArgumentException("limit must be between 1 and " + Limit.MAX_AMOUNT + ", got " + limit);
            }
            if (leaseTimeout < 1 || leaseTimeout > DurationFormat.MAX_NANOS) {
                throw new IllegalArgumentException("lease timeout must be > 0 and at most "
                        + DurationFormat.MAX_NANOS + "ns, got " + leaseTimeout + "ns");
            }
            if (maxPlaces < 1) {
                throw new IllegalArgumentException("max places must be at least 1, got " + maxPlaces);
            }
            return new ConcurrencyLimiter(this);
        }
    }
}
