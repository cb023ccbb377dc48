package dev.sluice.algorithm;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;

import java.util.List;

/**
 * What a limiter enforces on every key: an algorithm, one or more limits, and a mode. {@link #decide} is
 * the whole decision as a pure function of (state, time, cost), which every store makes atomic its own way.
 *
 * <h2>Several limits on one key</h2>
 * A request is admitted iff every limit admits it, and then it is taken from every limit; if any limit
 * rejects it, no limit changes. So a decision first brings every limit's state to {@code t} and asks each
 * how long the request would wait, and only when the longest wait allows it does it take the cost from
 * all of them. {@code remaining} is the least over the limits, {@code retry_after} and {@code reset_after}
 * the greatest ({@code retry_after} is "never" if any limit can never admit the request).
 *
 * <h2>Modes</h2>
 * <ul>
 *   <li>{@link Mode#REJECT}: admitted iff the longest wait is 0.</li>
 *   <li>{@link Mode#DELAY} (token-bucket, gcra): admitted iff the longest wait is at most {@code max_delay},
 *       with {@code delay} = that wait and the cost reserved. A rejection's {@code retry_after} is the wait
 *       beyond {@code max_delay}: after it, the same request is admitted (with a delay).</li>
 *   <li>{@link Mode#SHAPING} (leaky-bucket): admitted iff the longest wait is 0, with {@code delay} = the
 *       time the queue ahead of it takes to drain, so requests leave at a constant rate. With a max delay
 *       (what {@code acquire(maxWait)} asks), admitted only if that delay is at most {@code max_delay} too; a
 *       rejection's {@code retry_after} is then {@code max(wait, delay - max_delay)}, since the queue ahead
 *       drains as time passes and the room opens: after it, the same request is admitted.</li>
 * </ul>
 */
public final class Rule {
    /** The latest time a decision may be made at: 2^62 ns after the epoch (the year 2116). */
    public static final long MAX_TIME_NANOS = 1L << 62;
    /**
     * The max delay of a shaping rule that holds a request as long as its place in the queue asks, however
     * long: the queue's length is its only bound (nginx's {@code limit_req burst=N}). A max delay of 0 holds
     * nothing, admitting only into an empty queue.
     */
    public static final long NO_MAX_DELAY = Long.MAX_VALUE;

    private final Algorithm algorithm;
    private final List<Limit> limits;
    private final Mode mode;
    private final long maxDelayNanos;
    private final Transition<KeyState>[] transitions;
    private final int hash;

    private Rule(Algorithm algorithm, List<Limit> limits, Mode mode, long maxDelayNanos) {
        this.algorithm = algorithm;
        this.limits = List.copyOf(limits);
        this.mode = mode;
        this.maxDelayNanos = maxDelayNanos;
        this.transitions = transitionsOf(algorithm, this.limits);
        this.hash = java.util.Objects.hash(algorithm, this.limits, mode, maxDelayNanos);
    }

    /**
     * Two rules of the same algorithm, limits, mode and max delay decide alike, and are equal: a store that keeps
     * something per rule (the Redis store's scripts and remembered rejections) then keeps it once for a limiter
     * made anew per request, not once per limiter (a review found the remembered rejections of such limiters never
     * answering, and their scripts made again and again).
     */
    @Override
    public boolean equals(Object other) {
        return other == this || other instanceof Rule rule && hash == rule.hash && algorithm == rule.algorithm
                && mode == rule.mode && maxDelayNanos == rule.maxDelayNanos && limits.equals(rule.limits);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    @SuppressWarnings("unchecked")
    private static Transition<KeyState>[] transitionsOf(Algorithm algorithm, List<Limit> limits) {
        Transition<KeyState>[] transitions = new Transition[limits.size()];
        for (int i = 0; i < transitions.length; i++) {
            transitions[i] = (Transition<KeyState>) Transition.of(algorithm, limits.get(i));
        }
        return transitions;
    }

    /**
     * A rule, checked: at least one limit; burst only where the algorithm has one; interval refill only for
     * token-bucket; delay mode only for token-bucket and gcra, with {@code 0 < max_delay}; shaping only for
     * leaky-bucket, with {@link #NO_MAX_DELAY} or a max delay of {@code 0 <= max_delay} (0: a queue that holds
     * nothing, what {@code acquire} with no time to wait decides by).
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    public static Rule of(Algorithm algorithm, List<Limit> limits, Mode mode, long maxDelayNanos) {
        if (algorithm == null) {
            throw new IllegalArgumentException("an algorithm is required");
        }
        if (limits == null || limits.isEmpty()) {
            throw new IllegalArgumentException("at least one limit is required");
        }
        if (mode == null) {
            throw new IllegalArgumentException("a mode is required: reject, delay or shaping");
        }
        for (Limit limit : limits) {
            if (limit.burst() != limit.amount() && !algorithm.hasBurst()) {
                throw new IllegalArgumentException("limit " + limit + ": " + algorithm.refusesBurst());
            }
            if (limit.refill() != Refill.GREEDY && !algorithm.hasRefill()) {
                throw new IllegalArgumentException("limit " + limit + ": " + algorithm.refusesRefill());
            }
        }
        if (mode == Mode.DELAY) {
            if (!algorithm.canDelay()) {
                throw new IllegalArgumentException("delay mode is for token-bucket and gcra, not " + algorithm
                        + (algorithm == Algorithm.LEAKY_BUCKET ? " (use shaping)" : ""));
            }
            if (maxDelayNanos <= 0) {
                throw new IllegalArgumentException("delay mode needs a max delay > 0 (how long a request may wait),"
                        + " got " + (maxDelayNanos < 0 ? maxDelayNanos + "ns" : DurationFormat.format(maxDelayNanos)));
            }
            if (maxDelayNanos > DurationFormat.MAX_NANOS) {
                throw new IllegalArgumentException("delay mode needs a max delay of at most "
                        + DurationFormat.format(DurationFormat.MAX_NANOS) + ", got " + maxDelayNanos + "ns");
            }
            for (Limit limit : limits) {
                if (limit.refill() == Refill.INTERVAL) {
                    checkDebtFits(limit, maxDelayNanos);
                }
            }
        } else if (mode == Mode.SHAPING) {
            if (algorithm != Algorithm.LEAKY_BUCKET) {
                throw new IllegalArgumentException("shaping mode is for leaky-bucket, not " + algorithm);
            }
            if (maxDelayNanos != NO_MAX_DELAY && (maxDelayNanos < 0 || maxDelayNanos > DurationFormat.MAX_NANOS)) {
                throw new IllegalArgumentException("shaping takes a max delay between 0 and "
                        + DurationFormat.format(DurationFormat.MAX_NANOS) + ", got " + maxDelayNanos + "ns");
            }
        } else if (maxDelayNanos != 0) {
            throw new IllegalArgumentException("a max delay is for delay mode, not " + mode.label());
        }
        return new Rule(algorithm, limits, mode, maxDelayNanos);
    }

    /** Interval refill in delay mode may owe the refills of {@code max_delay}: that debt must fit too. */
    private static void checkDebtFits(Limit limit, long maxDelayNanos) {
        if (maxDelayNanos > longestDelayNanos(limit)) {
            throw new IllegalArgumentException("limit " + limit + ": max delay " + DurationFormat.format(maxDelayNanos)
                    + " spans too many refills");
        }
    }

    /**
     * The longest max delay a rule of these limits may have in delay mode: {@link DurationFormat#MAX_NANOS}, or
     * less where an interval refill's debt over {@code max_delay} ({@code max_delay / P + 2} refills of the larger
     * of {@code L} and {@code B}) would pass 2^61.
     */
    public long longestDelayNanos() {
        long longest = DurationFormat.MAX_NANOS;
        for (Limit limit : limits) {
            longest = Math.min(longest, longestDelayNanos(limit));
        }
        return longest;
    }

    /** For one limit: an interval refill's debt within 2^61 ({@link #longestDelayForDebt}). */
    private static long longestDelayNanos(Limit limit) {
        return limit.refill() != Refill.INTERVAL ? DurationFormat.MAX_NANOS : longestDelayForDebt(limit, 1L << 61);
    }

    /**
     * The longest max delay with which an interval refill's debt in delay mode, {@code max_delay / P + 2} refills of
     * the larger of {@code L} and {@code B}, stays within {@code bound}: {@code max_delay / P + 2 <= bound / max(L, B)},
     * that is {@code max_delay < (that - 1) × P}; at most {@link DurationFormat#MAX_NANOS}. The Redis store keeps its
     * debt within 2^53, where Lua's numbers are exact.
     */
    public static long longestDelayForDebt(Limit limit, long bound) {
        long periods = bound / Math.max(limit.amount(), limit.burst()) - 1;
        long period = limit.periodNanos();
        return periods <= 0 ? 0 : periods > DurationFormat.MAX_NANOS / period ? DurationFormat.MAX_NANOS
                : periods * period - 1;
    }

    /**
     * This rule in delay mode, waiting at most {@code maxDelayNanos} (or its own max delay, if shorter): what
     * a caller that is willing to wait uses. Same limits, so the same state for every key. A shaping rule stays
     * one, holding a request at most {@code maxDelayNanos} (or its own max delay, if shorter), {@code 0} too:
     * then it admits only into an empty queue.
     *
     * @throws IllegalArgumentException if the algorithm cannot reserve capacity (only token-bucket and gcra can,
     *                                  and leaky-bucket in shaping mode)
     */
    public Rule delaying(long maxDelayNanos) {
        if (mode == Mode.SHAPING) {
            long hold = Math.min(this.maxDelayNanos, maxDelayNanos);
            return hold == this.maxDelayNanos ? this : of(algorithm, limits, mode, hold);
        }
        long delay = mode == Mode.DELAY ? Math.min(this.maxDelayNanos, maxDelayNanos) : maxDelayNanos;
        return delay == this.maxDelayNanos && mode == Mode.DELAY ? this : of(algorithm, limits, Mode.DELAY, delay);
    }

    /** A rule that rejects what does not fit at once. */
    public static Rule of(Algorithm algorithm, List<Limit> limits) {
        return of(algorithm, limits, Mode.REJECT, 0);
    }

    public Algorithm algorithm() {
        return algorithm;
    }

    public List<Limit> limits() {
        return limits;
    }

    public Mode mode() {
        return mode;
    }

    /**
     * How long an admitted request may be held: delay mode's {@code max_delay}; in shaping mode a cap on the
     * queue's delay, or {@link #NO_MAX_DELAY}; 0 in reject mode.
     */
    public long maxDelayNanos() {
        return maxDelayNanos;
    }

    /** Whether an admitted request is held at most {@link #maxDelayNanos}: delay mode, or shaping with a cap. */
    public boolean hasMaxDelay() {
        return mode == Mode.DELAY || mode == Mode.SHAPING && maxDelayNanos != NO_MAX_DELAY;
    }

    /** @throws IllegalArgumentException naming {@code now} if it is outside {@code [0, MAX_TIME_NANOS]} */
    public static void checkTime(long now) {
        if (now < 0 || now > MAX_TIME_NANOS) {
            throw new IllegalArgumentException("time must be between 0 and " + MAX_TIME_NANOS
                    + "ns since the epoch, got " + now + "ns");
        }
    }

    /**
     * Decides a request of {@code cost} on a key whose state is {@code state} ({@code null} when the key is
     * untouched) at {@code now}, nanoseconds since the epoch.
     *
     * @throws IllegalArgumentException if the cost is negative or the time is outside
     *                                  {@code [0, MAX_TIME_NANOS]}; no decision is made
     * @throws IllegalStateException    if {@code state} was made by a rule of another algorithm or number of limits
     */
    public Outcome decide(KeyState state, long now, long cost) {
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
        checkTime(now);
        if (state != null && (state instanceof KeyState.Stack) != (transitions.length > 1)) {
            throw new IllegalStateException("the key's state was made by another rule than " + this);
        }
        try {
            return transitions.length == 1 ? decideOne(state, now, cost) : decideAll(state, now, cost);
        } catch (ClassCastException e) { // a state of another algorithm: two rules on one key of one store
            throw new IllegalStateException("the key's state was made by another rule than " + this, e);
        }
    }

    /**
     * The decision of a rule with one limit: {@link #decideAll} without the arrays, because this is the hot
     * path of nearly every limiter (the key's state holds the limit's state directly).
     */
    private Outcome decideOne(KeyState state, long now, long cost) {
        Transition<KeyState> transition = transitions[0];
        long t = state == null ? now : Math.max(now, state.time);
        KeyState current = transition.advance(state, t);
        KeyState unchanged = current == null ? null : state;
        long wait = cost == 0 ? 0 : transition.wait(current, t, cost);
        if (mode == Mode.SHAPING && cost > 0) {
            // apart, so that the other modes' path is the one it was before shaping had a max delay
            return shapeOne(transition, current, unchanged, t, wait, cost);
        }
        if (!fits(wait)) {
            return new Outcome(unchanged, this, current, t, false, retryAfter(wait), 0);
        }
        if (cost == 0) {
            return new Outcome(unchanged, this, current, t, true, 0, 0);
        }
        long delay = mode == Mode.DELAY ? wait : 0;
        KeyState next = transition.take(current, t, cost, delay);
        return new Outcome(next, this, next, t, true, 0, delay);
    }

    /** {@link #decideOne} in shaping mode: held as long as the queue ahead takes, and at most the max delay. */
    private Outcome shapeOne(Transition<KeyState> transition, KeyState current, KeyState unchanged, long t, long wait,
                             long cost) {
        long held = transition.resetAfter(current, t);
        if (!fits(wait, held)) {
            return new Outcome(unchanged, this, current, t, false, retryAfter(wait, held), 0);
        }
        KeyState next = transition.take(current, t, cost, 0);
        return new Outcome(next, this, next, t, true, 0, held);
    }

    /** The decision of a rule with one limit whose state at {@code t} is {@code state}. */
    Decision summarizeOne(boolean allowed, KeyState state, long t, long retryAfter, long delay) {
        Transition<KeyState> transition = transitions[0];
        return new Decision(allowed, transition.remaining(state, t), retryAfter, transition.resetAfter(state, t), delay,
                limits.get(0));
    }

    /** Whether a request that must wait {@code wait} is admitted now (with that delay in delay mode). */
    private boolean fits(long wait) {
        return wait == 0 || (mode == Mode.DELAY && wait != Transition.NEVER && wait <= maxDelayNanos);
    }

    /** The {@code retry_after} of a rejected request that must wait {@code wait}. */
    private long retryAfter(long wait) {
        return wait == Transition.NEVER ? Decision.NEVER : mode == Mode.DELAY ? wait - maxDelayNanos : wait;
    }

    /**
     * {@link #fits} in any mode, shaping's too: there {@code held}, the delay the queue ahead would give the request,
     * must be within the max delay as well.
     */
    private boolean fits(long wait, long held) {
        return mode == Mode.SHAPING ? wait == 0 && held <= maxDelayNanos : fits(wait);
    }

    /**
     * {@link #retryAfter} in any mode: in shaping, the queue's delay falls by as much as time passes, so it is within
     * the max delay after {@code held - max_delay}, and the room is there after {@code wait}.
     */
    private long retryAfter(long wait, long held) {
        return mode == Mode.SHAPING && wait != Transition.NEVER ? Math.max(wait, held - maxDelayNanos)
                : retryAfter(wait);
    }

    private Outcome decideAll(KeyState state, long now, long cost) {
        long t = state == null ? now : Math.max(now, state.time);
        int count = transitions.length;
        KeyState[] current = new KeyState[count];
        boolean untouched = true;
        for (int i = 0; i < count; i++) {
            // a stack of fewer limits (a rule of more limits since): the others untouched, as the Redis store reads them
            KeyState[] stored = state == null ? null : ((KeyState.Stack) state).limits;
            current[i] = transitions[i].advance(stored == null || i >= stored.length ? null : stored[i], t);
            untouched &= current[i] == null;
        }
        KeyState unchanged = untouched ? null : state;
        if (cost == 0) {
            return new Outcome(summarize(true, current, t, 0, 0, -1), unchanged, t);
        }
        long wait = 0;
        int waiting = -1;
        for (int i = 0; i < count && wait != Transition.NEVER; i++) {
            long limitWait = transitions[i].wait(current[i], t, cost);
            if (limitWait == Transition.NEVER || limitWait > wait) {
                wait = limitWait;
                waiting = i;
            }
        }
        long held = mode == Mode.SHAPING ? longestReset(current, t) : 0;
        if (!fits(wait, held)) {
            int decider = mode == Mode.SHAPING && wait != Transition.NEVER ? longestToHold(current, t, cost) : waiting;
            return new Outcome(summarize(false, current, t, retryAfter(wait, held), 0, decider), unchanged, t);
        }
        long delay = mode == Mode.DELAY ? wait : held;
        KeyState[] next = new KeyState[count];
        for (int i = 0; i < count; i++) {
            next[i] = transitions[i].take(current[i], t, cost, mode == Mode.DELAY ? delay : 0);
        }
        return new Outcome(summarize(true, next, t, 0, delay, -1),
                new KeyState.Stack(t, t + longestReset(next, t), next), t);
    }

    /**
     * The deciding limit of a shaping rejection: the first whose own wait, {@code max(wait, reset - max_delay)},
     * is the longest (the queue too long to join, rather than the limit with the least room).
     */
    private int longestToHold(KeyState[] states, long t, long cost) {
        long longest = -1;
        int decider = 0;
        for (int i = 0; i < states.length; i++) {
            long limitWait = Math.max(transitions[i].wait(states[i], t, cost),
                    transitions[i].resetAfter(states[i], t) - maxDelayNanos);
            if (limitWait > longest) {
                longest = limitWait;
                decider = i;
            }
        }
        return decider;
    }

    private long longestReset(KeyState[] states, long t) {
        long longest = 0;
        for (int i = 0; i < states.length; i++) {
            longest = Math.max(longest, transitions[i].resetAfter(states[i], t));
        }
        return longest;
    }

    /**
     * The decision on {@code states} at {@code t}; the deciding limit is {@code decider}, or when that is -1
     * the one with the least remaining.
     */
    private Decision summarize(boolean allowed, KeyState[] states, long t, long retryAfter, long delay, int decider) {
        long remaining = Long.MAX_VALUE;
        int least = 0;
        for (int i = 0; i < states.length; i++) {
            long limitRemaining = transitions[i].remaining(states[i], t);
            if (limitRemaining < remaining) {
                remaining = limitRemaining;
                least = i;
            }
        }
        int reported = decider >= 0 ? decider : least;
        return new Decision(allowed, remaining, retryAfter, longestReset(states, t), delay, limits.get(reported),
                transitions[reported].resetAfter(states[reported], t));
    }

    @Override
    public String toString() {
        StringBuilder text = new StringBuilder(algorithm.label()).append(' ').append(limits);
        if (mode != Mode.REJECT) {
            text.append(' ').append(mode.label());
        }
        if (hasMaxDelay()) {
            text.append(" max_delay=").append(DurationFormat.format(maxDelayNanos));
        }
        return text.toString();
    }
}
