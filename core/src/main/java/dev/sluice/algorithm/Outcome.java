package dev.sluice.algorithm;

import dev.sluice.Decision;

/**
 * What {@link Rule#decide} makes of a request: the state the store keeps after it, and the decision.
 *
 * <p>A store installs {@link #next()} with a compare-and-set and only then reads {@link #decision()}: for a
 * key with one limit the decision's fields ({@code remaining} needs a division) are worked out on that
 * read, after the compare-and-set, so that the window between reading a key's state and swapping it stays
 * as short as the transition itself. Under contention a shorter window means fewer threads that must
 * decide again.
 */
public final class Outcome {
    private final KeyState next;
    private Decision decision;
    // what the decision of a key with one limit is worked out from, when it is first asked for
    private final Rule rule;
    private final KeyState summarized;
    private final long time;
    private final long retryAfter;
    private final long delay;
    private final boolean allowed;

    /** An outcome whose decision, made at {@code time}, is known. */
    Outcome(Decision decision, KeyState next, long time) {
        this(next, null, null, time, false, 0, 0);
        this.decision = decision;
    }

    /** An outcome of a key with one limit, whose decision is summarized from {@code summarized} at {@code time}. */
    Outcome(KeyState next, Rule rule, KeyState summarized, long time, boolean allowed, long retryAfter, long delay) {
        this.next = next;
        this.rule = rule;
        this.summarized = summarized;
        this.time = time;
        this.allowed = allowed;
        this.retryAfter = retryAfter;
        this.delay = delay;
    }

    /**
     * The state to store: the very state given when nothing changed (a rejection, a peek), {@code null} when
     * the key is untouched and can be dropped.
     */
    public KeyState next() {
        return next;
    }

    /** The time the request was decided at. */
    public long time() {
        return time;
    }

    /** The answer. */
    public Decision decision() {
        Decision known = decision;
        if (known == null) {
            known = rule.summarizeOne(allowed, summarized, time, retryAfter, delay);
            decision = known;
        }
        return known;
    }
}
