package dev.sluice;

import dev.sluice.algorithm.Rule;
import java.time.Duration;

/**
 * A limiter whose rate follows the health of what it protects (the adaptive algorithm of the seeds): AIMD,
 * as TCP does with its window. The admitted rate moves between a floor and a ceiling, one step per interval:
 * <ul>
 *   <li>the first congestion signal of an interval — a latency over the target ({@link #onSuccess(Duration)}), an
 *       error ({@link #onError()}) or an explicit overload ({@link #onOverload()}) — multiplies the rate by
 *       {@code decrease} (default 0.5) at once, but not below the floor; the interval ends without a rise, and
 *       the signals after the first in it change nothing more (as TCP halves its window once a round trip);</li>
 *   <li>an interval without congestion ends with a rise of {@code increase} (default a tenth of the ceiling), but
 *       not above the ceiling.</li>
 * </ul>
 * The fall comes with the signal, not at the interval's end: a resource that has just said it is overloaded
 * gets the lower rate from then on (a review found 199 more requests admitted in the second after an overload
 * at a ceiling of 100, when the fall waited for the interval's end).
 * So from the ceiling {@code C} it reaches the floor {@code F} within {@code ceil(log(F/C) / log(decrease))}
 * congested intervals, and climbs back within {@code ceil((C − F) / increase)} healthy ones.
 *
 * <p>Requests are decided by a greedy token bucket at the current rate, holding at most one period's worth
 * ({@code capacity = rate}). When the rate falls, the tokens held stay, but those above the new capacity are
 * dropped; when it rises, the room it adds is there at once (a full bucket stays full, so a quiet limiter is
 * untouched whatever its rate). The bucket is kept as a level (the room taken) in units of token·nanosecond, so
 * every decision is exact in integers; that needs {@code ceiling × period} below 2^62 (a billion per second fits).
 *
 * <p>{@code retry_after} and {@code reset_after} are waits "if nothing else arrived" (docs/algorithms.md), and
 * with nothing arriving the rate keeps moving: unchanged at the end of an interval that already saw congestion,
 * then up by {@code increase} at the end of every interval. So they are worked out along that schedule, interval
 * by interval while the bucket drains, then in one step for the rate to reach the cost; {@code retry_after} is
 * −1 only for a cost above the ceiling, which no rate admits.
 *
 * <p>One limiter protects one resource: it has no keys. Its methods take a short lock.
 *
 * <table>
 *   <caption>Parameters</caption>
 *   <tr><th>builder method</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code ceiling(n)}</td><td>required</td><td>the highest rate, units per period</td></tr>
 *   <tr><td>{@code floor(n)}</td><td>1</td><td>the lowest rate</td></tr>
 *   <tr><td>{@code initial(n)}</td><td>the ceiling</td><td>the rate at start</td></tr>
 *   <tr><td>{@code period(d)}</td><td>1 s</td><td>the unit of the rates</td></tr>
 *   <tr><td>{@code interval(d)}</td><td>1 s</td><td>how often the rate moves, at least a ten-millionth of the period</td></tr>
 *   <tr><td>{@code increase(n)}</td><td>ceiling / 10 (at least 1)</td><td>the additive step of a healthy interval</td></tr>
 *   <tr><td>{@code decrease(f)}</td><td>0.5</td><td>the factor of a congested interval, 0 &lt; f &lt; 1</td></tr>
 *   <tr><td>{@code latencyTarget(d)}</td><td>none</td><td>a success slower than this counts as congestion</td></tr>
 *   <tr><td>{@code clock(c)}</td><td>{@link Clock#system()}</td><td>the time source</td></tr>
 * </table>
 */
public final class AdaptiveLimiter {
    private final long floor;
    private final long ceiling;
    private final long period;
    private final long interval;
    private final long increase;
    private final double decrease;
    private final long latencyTarget;
    private final Clock clock;

    // guarded by this
    private long rate;
    private long levelTimesPeriod; // level·P: the bucket drains `rate` of it per nanosecond
    private long since;            // the time of levelTimesPeriod
    private long intervalEnd;
    private boolean congested;

    private AdaptiveLimiter(Builder b) {
        this.floor = b.floor;
        this.ceiling = b.ceiling;
        this.period = b.period;
        this.interval = b.interval;
        this.increase = b.increase > 0 ? b.increase : Math.max(1, b.ceiling / 10);
        this.decrease = b.decrease;
        this.latencyTarget = b.latencyTarget;
        this.clock = b.clock;
        this.rate = b.initial > 0 ? b.initial : b.ceiling;
        long now = clock.nanos();
        Rule.checkTime(now); // past it, now + interval could wrap, and advance() would loop for ever
        this.since = now;
        this.intervalEnd = now + interval;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Decides a request of cost 1 at the current rate. */
    public Decision tryAcquire() {
        return tryAcquire(1);
    }

    /** Decides a request of {@code cost} at the current rate; a rejection changes nothing. */
    public synchronized Decision tryAcquire(long cost) {
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
        long now = advance();
        long capacity = rate * period;
        Limit limit = Limit.of(rate, period);
        if (cost > ceiling) {
            return new Decision(false, remaining(capacity), Decision.NEVER, untilFits(now, UNTOUCHED), 0, limit);
        }
        if (cost > rate || levelTimesPeriod + cost * period > capacity) {
            return new Decision(false, remaining(capacity), untilFits(now, cost), untilFits(now, UNTOUCHED), 0, limit);
        }
        levelTimesPeriod += cost * period;
        since = now;
        return new Decision(true, remaining(capacity), 0, untilFits(now, UNTOUCHED), 0, limit);
    }

    private long remaining(long capacity) {
        return (capacity - levelTimesPeriod) / period;
    }

    /** The "cost" of {@link #untilFits} that asks for the bucket to be full again: untouched. */
    private static final long UNTOUCHED = -1;

    /**
     * The wait from {@code now} (where the bucket was just drained) until a request of {@code cost} fits, or, for
     * {@link #UNTOUCHED}, until the bucket is full, if nothing else arrived: the rate moves at each interval's end
     * as {@link #advance} would move it with no signal but those already seen. Within an interval the level drains
     * at that interval's rate, so a fit inside it is one division; at its end the rate moves and the next interval
     * is tried. Once the bucket is full and the interval's congestion spent, only the rate can still be short of
     * the cost, and it climbs by {@code increase} an interval: that is one step; and once the rate is at the
     * ceiling with no congestion to come, the drain is one division however many intervals it spans. So the loop
     * turns at most once an interval while the rate climbs to the ceiling, {@code (ceiling − floor) / increase + 2}
     * times (12 with the defaults), and a limiter at its ceiling answers at once. {@code cost} is at most the
     * ceiling.
     */
    private long untilFits(long now, long cost) {
        long t = now;
        long level = levelTimesPeriod;
        long r = rate;
        long end = intervalEnd;
        boolean congestedHere = congested;
        while (true) {
            if (cost == UNTOUCHED || cost <= r) {
                long fitsAt = cost == UNTOUCHED ? 0 : (r - cost) * period; // the level at which it fits
                long wait = level <= fitsAt ? 0 : ceilDiv(level - fitsAt, r);
                // at the interval's end the rate moves first, as in advance(); at the ceiling with no congestion
                // left it moves no more, and the drain goes on at r to the end
                if (wait < end - t || r == ceiling && !congestedHere) {
                    return t + wait - now;
                }
            } else if (level == 0 && !congestedHere) {
                long intervals = ceilDiv(cost - r, increase); // rate r + k·increase >= cost after k ends
                // saturated: a product past 2^63 has a high word of 0 and wraps negative (a review found a wait
                // of −5.5·10^18 ns for 149,999 rises of a day each)
                long later = intervals - 1 > Long.MAX_VALUE / interval ? Long.MAX_VALUE : (intervals - 1) * interval;
                return later > Long.MAX_VALUE - (end - now) ? Long.MAX_VALUE : end - now + later;
            }
            long drained = Math.multiplyHigh(end - t, r) != 0 ? Long.MAX_VALUE : (end - t) * r;
            level = drained < 0 || drained >= level ? 0 : level - drained;
            t = end;
            r = next(r, congestedHere); // a rise, or none: it adds room and leaves the level
            congestedHere = false;
            end += interval;
        }
    }

    /** The rate after an interval that was congested (lowered already, at its first signal) or not. */
    private long next(long r, boolean congestedThen) {
        return congestedThen ? r : Math.min(ceiling, r + increase);
    }

    /**
     * The level after the rate moves from {@code from} to {@code to}: a fall takes the lost capacity from the room
     * left first, so the tokens held stay up to the new capacity; a rise adds room and leaves the level.
     */
    private long lowered(long level, long from, long to) {
        return to >= from ? level : Math.max(0, level - (from - to) * period);
    }

    private static long ceilDiv(long a, long b) {
        return a / b + (a % b == 0 ? 0 : 1);
    }

    /**
     * Drains the bucket to now and moves the rate for every interval that has ended. A level drains within one
     * period, so after a long quiet spell this loops over at most {@code period / interval + 1} intervals
     * before the rest are taken in one step. Holds the lock.
     */
    private long advance() {
        long read = clock.nanos();
        Rule.checkTime(read);
        long now = Math.max(since, read);
        while (now >= intervalEnd) {
            drainTo(intervalEnd);
            rate = next(rate, congested); // a rise, or none: the level stays (a fall comes at the signal)
            congested = false;
            intervalEnd += interval;
            if (levelTimesPeriod == 0 && now >= intervalEnd) {
                // an empty bucket stays empty: the healthy intervals left only raise the rate, all at once
                long healthy = (now - intervalEnd) / interval + 1;
                rate = healthy >= (ceiling - rate + increase - 1) / increase ? ceiling : rate + healthy * increase;
                intervalEnd += healthy * interval;
            }
        }
        drainTo(now);
        return now;
    }

    private void drainTo(long t) {
        if (t > since) {
            long drained = Math.multiplyHigh(t - since, rate) != 0 ? Long.MAX_VALUE : (t - since) * rate;
            levelTimesPeriod = drained < 0 || drained >= levelTimesPeriod ? 0 : levelTimesPeriod - drained;
            since = t;
        }
    }

    /** A request succeeded in {@code latency}; over the target, that is congestion. */
    public void onSuccess(Duration latency) {
        if (latency == null || latency.isNegative()) {
            throw new IllegalArgumentException("latency must be >= 0, got " + latency);
        }
        if (latencyTarget > 0 && DurationFormat.saturatedNanos(latency) > latencyTarget) {
            onOverload();
        }
    }

    /** A request failed in a way that says the protected resource is struggling. */
    public void onError() {
        onOverload();
    }

    /** The protected resource says it is overloaded (a 503, a queue too long). */
    public synchronized void onOverload() {
        advance();
        if (!congested) {
            long lower = Math.max(floor, (long) (rate * decrease));
            levelTimesPeriod = lowered(levelTimesPeriod, rate, lower);
            rate = lower;
            congested = true;
        }
    }

    /** The rate now, in units per period. */
    public synchronized long rate() {
        advance();
        return rate;
    }

    /** The settings of an {@link AdaptiveLimiter}; see its table of parameters. */
    public static final class Builder {
        private static final long MAX_INTERVALS_PER_PERIOD = 10_000_000; // a period of 115 days at the default 1 s
        private long floor = 1;
        private long ceiling;
        private long initial;
        private long period = 1_000_000_000L;
        private long interval = 1_000_000_000L;
        /** 0 until set: then a tenth of the ceiling. */
        private long increase;
        private boolean increaseSet;
        private double decrease = 0.5;
        private long latencyTarget;
        private Clock clock = Clock.system();

        private Builder() {
        }

        public Builder floor(long floor) {
            this.floor = floor;
            return this;
        }

        public Builder ceiling(long ceiling) {
            this.ceiling = ceiling;
            return this;
        }

        public Builder initial(long initial) {
            this.initial = initial;
            return this;
        }

        public Builder period(Duration period) {
            if (period == null) {
                throw new IllegalArgumentException("period must not be null");
            }
            this.period = DurationFormat.saturatedNanos(period);
            return this;
        }

        public Builder interval(Duration interval) {
            if (interval == null) {
                throw new IllegalArgumentException("interval must not be null");
            }
            this.interval = DurationFormat.saturatedNanos(interval);
            return this;
        }

        public Builder increase(long step) {
            this.increase = step;
            this.increaseSet = true;
            return this;
        }

        public Builder decrease(double factor) {
            this.decrease = factor;
            return this;
        }

        /** Latency above this is congestion (default: none; {@link Duration#ZERO} is none too). */
        public Builder latencyTarget(Duration target) {
            if (target == null || target.isNegative()) {
                throw new IllegalArgumentException("latency target must be >= 0, got " + target);
            }
            this.latencyTarget = DurationFormat.saturatedNanos(target);
            return this;
        }

        public Builder clock(Clock clock) {
            if (clock == null) {
                throw new IllegalArgumentException("clock must not be null");
            }
            this.clock = clock;
            return this;
        }

        /** @throws IllegalArgumentException naming the parameter that is out of range */
        public AdaptiveLimiter build() {
            if (ceiling < 1 || ceiling > Limit.MAX_AMOUNT) {
                throw new IllegalArgumentException("ceiling must be between 1 and " + Limit.MAX_AMOUNT + ", got "
                        + ceiling);
            }
            if (floor < 1 || floor > ceiling) {
                throw new IllegalArgumentException("floor must be between 1 and the ceiling " + ceiling + ", got " + floor);
            }
            if (initial != 0 && (initial < floor || initial > ceiling)) {
                throw new IllegalArgumentException("initial rate must be between the floor " + floor
                        + " and the ceiling " + ceiling + ", got " + initial);
            }
            if (period < 1 || interval < 1) {
                throw new IllegalArgumentException("period and interval must be > 0, got " + period + "ns and "
                        + interval + "ns");
            }
            if (period > DurationFormat.MAX_NANOS || interval > DurationFormat.MAX_NANOS) {
                throw new IllegalArgumentException("period and interval must be at most "
                        + DurationFormat.LONGEST + ", got "
                        + DurationFormat.format(period) + " and " + DurationFormat.format(interval));
            }
            // advance() and untilFits() step interval by interval while the bucket drains, which takes up to a
            // period: ten million steps under the lock at most (a review found 1h with 1µs allowed, 3.6·10^9 of them)
            if (period / interval > MAX_INTERVALS_PER_PERIOD) {
                throw new IllegalArgumentException("interval must be at least period / " + MAX_INTERVALS_PER_PERIOD
                        + ", got " + DurationFormat.format(interval) + " for a period of " + DurationFormat.format(period));
            }
            // below, not up to: the level and a request's room add up to twice it, which must stay in a long
            // whole: a product past 2^63 wraps to a negative number, which a plain comparison let by (a review)
            if (Math.multiplyHigh(ceiling, period) != 0 || ceiling * period < 0 || ceiling * period >= (1L << 62)) {
                throw new IllegalArgumentException("ceiling × period must be below 2^62, got " + ceiling + " per "
                        + DurationFormat.format(period));
            }
            if (increaseSet && increase < 1) { // 0 given was taken as the default (a review found it)
                throw new IllegalArgumentException("increase must be >= 1, got " + increase);
            }
            if (!(decrease > 0 && decrease < 1)) {
                throw new IllegalArgumentException("decrease must be between 0 and 1, got " + decrease);
            }
            return new AdaptiveLimiter(this);
        }
    }
}
