package dev.sluice.testkit;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongPredicate;

/**
 * docs/algorithms.md written a second time, as literally as possible, to check every store against.
 *
 * <p>It shares no code with sluice-core and works another way: each algorithm keeps the variables the spec
 * names (a token count, a bucket level, a TAT, a log, counters per window) in unbounded integers, scaled so
 * that no division is ever needed ({@code tokens·P}, {@code level·P}, {@code TAT·L}); and the fields that
 * the core computes in closed form, {@code retry_after}, {@code reset_after} and the wait of delay mode,
 * are found here by their definitions: the smallest whole number of nanoseconds after which the request
 * would be admitted (or the key untouched) if nothing else arrived, by binary search over a predicate.
 * Slow, and meant to be: it is an oracle for random traces of a few hundred requests.
 */
public final class ReferenceModel {
    private static final long SEARCH_LIMIT = 1L << 61;

    private final Algorithm algorithm;
    private final List<Limit> limits;
    private final Mode mode;
    private final long maxDelay;
    private final Map<String, Key> keys = new HashMap<>();

    public ReferenceModel(Algorithm algorithm, List<Limit> limits, Mode mode, long maxDelayNanos) {
        this.algorithm = algorithm;
        this.limits = List.copyOf(limits);
        this.mode = mode;
        this.maxDelay = maxDelayNanos;
    }

    /** The decision for a request of {@code cost} on {@code key} at {@code nanos} since the epoch. */
    public Decision decide(String key, long nanos, long cost) {
        Key state = keys.computeIfAbsent(key, k -> new Key(meters()));
        long t = Math.max(nanos, state.lastAdmission);
        Meter[] meters = state.meters;
        if (cost == 0) {
            return forgetIfUntouched(key, t, summary(true, meters, t, 0, 0, -1));
        }
        int never = -1;
        for (int i = 0; i < meters.length && never < 0; i++) {
            if (cost > meters[i].capacity()) {
                never = i;
            }
        }
        if (never >= 0) {
            return forgetIfUntouched(key, t, summary(false, meters, t, Decision.NEVER, 0, never));
        }
        long wait = 0;
        int waiting = -1;
        for (int i = 0; i < meters.length; i++) {
            Meter meter = meters[i];
            long limitWait = smallestWait(t, u -> meter.admits(u, cost));
            if (limitWait > wait) {
                wait = limitWait;
                waiting = i;
            }
        }
        boolean admitted = wait == 0 || (mode == Mode.DELAY && wait <= maxDelay);
        if (mode == Mode.SHAPING && maxDelay != Long.MAX_VALUE) { // Long.MAX_VALUE: no max delay
            // held at most maxDelay: rejected until the room is there and the queue ahead within it, by search; the
            // deciding limit is the first that is so the latest
            long retry = smallestWait(t, u -> {
                for (Meter meter : meters) {
                    if (!meter.admits(u, cost) || ((Leaky) meter).queueAhead(u) > maxDelay) {
                        return false;
                    }
                }
                return true;
            });
            if (retry > 0) {
                long latest = -1;
                int decider = 0;
                for (int i = 0; i < meters.length; i++) {
                    Meter meter = meters[i];
                    long limitWait = smallestWait(t, u -> meter.admits(u, cost) && ((Leaky) meter).queueAhead(u) <= maxDelay);
                    if (limitWait > latest) {
                        latest = limitWait;
                        decider = i;
                    }
                }
                return forgetIfUntouched(key, t, summary(false, meters, t, retry, 0, decider));
            }
        }
        if (!admitted) {
            return forgetIfUntouched(key, t, summary(false, meters, t, mode == Mode.DELAY ? wait - maxDelay : wait, 0, waiting));
        }
        long delay = 0;
        if (mode == Mode.DELAY) {
            delay = wait;
        } else if (mode == Mode.SHAPING) {
            for (Meter meter : meters) {
                delay = Math.max(delay, ((Leaky) meter).queueAhead(t));
            }
        }
        for (Meter meter : meters) {
            if (meter instanceof Interval interval) {
                interval.take(t, t + (mode == Mode.DELAY ? delay : 0), cost);
            } else {
                meter.take(t, cost);
            }
        }
        state.lastAdmission = t;
        return summary(true, meters, t, 0, delay, -1);
    }

    /**
     * A key whose every limit is untouched is forgotten, with its clock: a store may drop it then (the
     * in-memory store does, and Redis lets it expire), so a later request stamped before the key's last
     * admission finds it fresh.
     */
    private Decision forgetIfUntouched(String key, long t, Decision decision) {
        if (decision.resetAfterNanos() == 0) {
            keys.remove(key);
        }
        return decision;
    }

    private Decision summary(boolean allowed, Meter[] meters, long t, long retryAfter, long delay, int decider) {
        long remaining = Long.MAX_VALUE;
        int least = 0;
        for (int i = 0; i < meters.length; i++) {
            long limitRemaining = meters[i].remaining(t);
            if (limitRemaining < remaining) {
                remaining = limitRemaining;
                least = i;
            }
        }
        long resetAfter = smallestWait(t, u -> {
            for (Meter meter : meters) {
                if (!meter.untouched(u)) {
                    return false;
                }
            }
            return true;
        });
        int reported = decider >= 0 ? decider : least;
        return new Decision(allowed, remaining, retryAfter, resetAfter, delay, limits.get(reported),
                smallestWait(t, meters[reported]::untouched));
    }

    /** The smallest {@code d ≥ 0} with {@code holds(t + d)}; {@code holds} must stay true once it is. */
    private static long smallestWait(long t, LongPredicate holds) {
        if (holds.test(t)) {
            return 0;
        }
        long never = 0;
        long surely = SEARCH_LIMIT;
        if (!holds.test(t + surely)) {
            throw new AssertionError("the reference model found no time at which the condition holds");
        }
        while (surely - never > 1) {
            long middle = never + (surely - never) / 2;
            if (holds.test(t + middle)) {
                surely = middle;
            } else {
                never = middle;
            }
        }
        return surely;
    }

    private Meter[] meters() {
        Meter[] meters = new Meter[limits.size()];
        for (int i = 0; i < meters.length; i++) {
            Limit limit = limits.get(i);
            switch (algorithm) {
                case FIXED_WINDOW -> meters[i] = new Fixed(limit);
                case SLIDING_LOG -> meters[i] = new Log(limit);
                case SLIDING_WINDOW -> meters[i] = new Weighted(limit);
                case TOKEN_BUCKET -> meters[i] = limit.refill() == Refill.INTERVAL ? new Interval(limit) : new Tokens(limit);
                case GCRA -> meters[i] = new Tat(limit);
                case LEAKY_BUCKET -> meters[i] = new Leaky(limit);
                default -> throw new AssertionError(algorithm);
            }
        }
        return meters;
    }

    private static final class Key {
        final Meter[] meters;
        long lastAdmission = Long.MIN_VALUE;

        Key(Meter[] meters) {
            this.meters = meters;
        }
    }

    /** One limit of one key, as the spec describes it. */
    private interface Meter {
        /** Would a request of {@code cost} be admitted at {@code u}, nothing else having arrived? */
        boolean admits(long u, long cost);

        void take(long t, long cost);

        long remaining(long t);

        boolean untouched(long u);

        long capacity();
    }

    private static BigInteger big(long value) {
        return BigInteger.valueOf(value);
    }

    /** {@code floor(a / b)} clamped to at least 0, for {@code b > 0}. */
    private static long floorAtLeastZero(BigInteger a, BigInteger b) {
        return a.signum() <= 0 ? 0 : a.divide(b).longValueExact();
    }

    /** fixed-window: a counter for the window {@code floor(t/P)}. */
    private static final class Fixed implements Meter {
        final long limit;
        final long period;
        long window = -1;
        long count;

        Fixed(Limit limit) {
            this.limit = limit.amount();
            this.period = limit.periodNanos();
        }

        long countAt(long u) {
            return Math.floorDiv(u, period) == window ? count : 0;
        }

        public boolean admits(long u, long cost) {
            return countAt(u) + cost <= limit;
        }

        public void take(long t, long cost) {
            count = countAt(t) + cost;
            window = Math.floorDiv(t, period);
        }

        public long remaining(long t) {
            return limit - countAt(t);
        }

        public boolean untouched(long u) {
            return countAt(u) == 0;
        }

        public long capacity() {
            return limit;
        }
    }

    /** sliding-log: every admitted (s, c); an entry counts at t iff t − s < P. */
    private static final class Log implements Meter {
        final long limit;
        final long period;
        final List<long[]> entries = new ArrayList<>();

        Log(Limit limit) {
            this.limit = limit.amount();
            this.period = limit.periodNanos();
        }

        long usedAt(long u) {
            long used = 0;
            for (long[] entry : entries) {
                if (u - entry[0] < period) {
                    used += entry[1];
                }
            }
            return used;
        }

        public boolean admits(long u, long cost) {
            return usedAt(u) + cost <= limit;
        }

        public void take(long t, long cost) {
            entries.add(new long[] {t, cost});
        }

        public long remaining(long t) {
            return limit - usedAt(t);
        }

        public boolean untouched(long u) {
            return usedAt(u) == 0;
        }

        public long capacity() {
            return limit;
        }
    }

    /** sliding-window: a counter per fixed window, the previous one weighted by its overlap. */
    private static final class Weighted implements Meter {
        final long limit;
        final long period;
        final TreeMap<Long, Long> counts = new TreeMap<>();

        Weighted(Limit limit) {
            this.limit = limit.amount();
            this.period = limit.periodNanos();
        }

        /** {@code estimate·P = prev·(P − e) + curr·P}. */
        BigInteger estimateTimesPeriod(long u) {
            long window = Math.floorDiv(u, period);
            long elapsed = u - window * period;
            long prev = counts.getOrDefault(window - 1, 0L);
            long curr = counts.getOrDefault(window, 0L);
            return big(prev).multiply(big(period - elapsed)).add(big(curr).multiply(big(period)));
        }

        public boolean admits(long u, long cost) {
            return estimateTimesPeriod(u).add(big(cost).multiply(big(period)))
                    .compareTo(big(limit).multiply(big(period))) <= 0;
        }

        public void take(long t, long cost) {
            counts.merge(Math.floorDiv(t, period), cost, Long::sum);
        }

        public long remaining(long t) {
            return floorAtLeastZero(big(limit).multiply(big(period)).subtract(estimateTimesPeriod(t)), big(period));
        }

        public boolean untouched(long u) {
            return estimateTimesPeriod(u).signum() == 0;
        }

        public long capacity() {
            return limit;
        }
    }

    /** token-bucket, greedy refill: tokens (kept as tokens·P) refilled at L per P, capped at B. */
    private static final class Tokens implements Meter {
        final long rate;
        final long period;
        final long capacity;
        BigInteger tokensTimesPeriod;
        long since;

        Tokens(Limit limit) {
            this.rate = limit.amount();
            this.period = limit.periodNanos();
            this.capacity = limit.burst();
            this.tokensTimesPeriod = big(capacity).multiply(big(period));
        }

        BigInteger at(long u) {
            BigInteger full = big(capacity).multiply(big(period));
            return tokensTimesPeriod.add(big(u - since).multiply(big(rate))).min(full);
        }

        public boolean admits(long u, long cost) {
            return at(u).compareTo(big(cost).multiply(big(period))) >= 0;
        }

        public void take(long t, long cost) {
            tokensTimesPeriod = at(t).subtract(big(cost).multiply(big(period)));
            since = t;
        }

        public long remaining(long t) {
            return floorAtLeastZero(at(t), big(period));
        }

        public boolean untouched(long u) {
            return at(u).equals(big(capacity).multiply(big(period)));
        }

        public long capacity() {
            return capacity;
        }
    }

    /** token-bucket, interval refill: L tokens at anchor + n·P, the anchor set by a request finding it full. */
    private static final class Interval implements Meter {
        final long refill;
        final long period;
        final long capacity;
        boolean started;
        long anchor;
        long tokens;
        long since;

        Interval(Limit limit) {
            this.refill = limit.amount();
            this.period = limit.periodNanos();
            this.capacity = limit.burst();
        }

        BigInteger at(long u) {
            if (!started) {
                return big(capacity);
            }
            long refills = Math.floorDiv(u - anchor, period) - Math.floorDiv(since - anchor, period);
            return big(tokens).add(big(refills).multiply(big(refill))).min(big(capacity));
        }

        public boolean admits(long u, long cost) {
            return at(u).compareTo(big(cost)) >= 0;
        }

        public void take(long t, long cost) {
            take(t, t, cost);
        }

        /**
         * Takes {@code cost} for a request decided at {@code t} that starts at {@code start} (later in delay mode): from
         * what the bucket holds then, every refill up to it capped at B. Its refills count from {@code t} if the
         * bucket is full at {@code t}.
         */
        void take(long t, long start, long cost) {
            if (at(t).equals(big(capacity))) {
                anchor = t;
                tokens = capacity;
                since = t;
                started = true;
            }
            tokens = at(start).longValueExact() - cost;
            since = start;
        }

        public long remaining(long t) {
            return Math.max(0, at(t).longValueExact());
        }

        public boolean untouched(long u) {
            return at(u).equals(big(capacity));
        }

        public long capacity() {
            return capacity;
        }
    }

    /** gcra: the theoretical arrival time, kept as TAT·L so that T = P/L adds as P. */
    private static final class Tat implements Meter {
        final long rate;
        final long period;
        final long burst;
        BigInteger tatTimesRate;

        Tat(Limit limit) {
            this.rate = limit.amount();
            this.period = limit.periodNanos();
            this.burst = limit.burst();
        }

        BigInteger newTat(long u, long cost) {
            BigInteger now = big(u).multiply(big(rate));
            BigInteger base = tatTimesRate == null ? now : tatTimesRate.max(now);
            return base.add(big(cost).multiply(big(period)));
        }

        public boolean admits(long u, long cost) {
            // new_tat − t ≤ B·T, times L
            return newTat(u, cost).subtract(big(u).multiply(big(rate)))
                    .compareTo(big(burst).multiply(big(period))) <= 0;
        }

        public void take(long t, long cost) {
            tatTimesRate = newTat(t, cost);
        }

        public long remaining(long t) {
            // floor((B·T − max(TAT − t, 0)) / T), times L over P
            BigInteger ahead = tatTimesRate == null ? BigInteger.ZERO
                    : tatTimesRate.subtract(big(t).multiply(big(rate))).max(BigInteger.ZERO);
            return floorAtLeastZero(big(burst).multiply(big(period)).subtract(ahead), big(period));
        }

        public boolean untouched(long u) {
            return tatTimesRate == null || tatTimesRate.compareTo(big(u).multiply(big(rate))) <= 0;
        }

        public long capacity() {
            return burst;
        }
    }

    /** leaky-bucket: a level (kept as level·P) draining at L per P; a key starts empty. */
    private static final class Leaky implements Meter {
        final long rate;
        final long period;
        final long capacity;
        BigInteger levelTimesPeriod = BigInteger.ZERO;
        long since;

        Leaky(Limit limit) {
            this.rate = limit.amount();
            this.period = limit.periodNanos();
            this.capacity = limit.burst();
        }

        BigInteger at(long u) {
            return levelTimesPeriod.subtract(big(u - since).multiply(big(rate))).max(BigInteger.ZERO);
        }

        public boolean admits(long u, long cost) {
            return at(u).add(big(cost).multiply(big(period))).compareTo(big(capacity).multiply(big(period))) <= 0;
        }

        public void take(long t, long cost) {
            levelTimesPeriod = at(t).add(big(cost).multiply(big(period)));
            since = t;
        }

        public long remaining(long t) {
            return floorAtLeastZero(big(capacity).multiply(big(period)).subtract(at(t)), big(period));
        }

        public boolean untouched(long u) {
            return at(u).signum() == 0;
        }

        public long capacity() {
            return capacity;
        }

        /** {@code level·P/L}: how long the queue ahead of a request admitted at t takes to drain, rounded up. */
        long queueAhead(long t) {
            BigInteger[] quotient = at(t).divideAndRemainder(big(rate));
            return quotient[0].longValueExact() + (quotient[1].signum() == 0 ? 0 : 1);
        }
    }
}
