package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The rejections a {@link RedisStore} remembers, so that a key rejected with {@code retry_after = x} is answered
 * "rejected" in this process until {@code x} has passed, without a call to Redis (the store's class comment says
 * when that is right).
 *
 * <p>Three things make a remembered rejection wrong, and each forgets it: its time passing (it is dropped when
 * its key asks again, or by a sweep once the memory is full); the key being admitted in this process at another
 * cost (it was charged); and a reset of the key. A reset is counted as it begins and as it ends ({@link #resetting}),
 * and a call that saw the count move while it was in flight remembers nothing: Redis may have run it before the
 * reset's {@code DEL}.
 *
 * <p>At most {@code mostRemembered} rejections are remembered in all, under every rule together: one map, keyed by
 * rule and key. A bound per rule held a hundred thousand under each of a thousand rules, and Envoy's calls, each
 * bringing a limit of its own (a rule each amount), filled 802,000 entries, 191 MB of a server's heap until the end
 * of their day (a review found it).
 */
final class RejectionMemory {
    /** The least time between two sweeps. */
    private static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final boolean on;
    /** The most rejections remembered, under every rule together. */
    private final int mostRemembered;
    /** The most rules remembered under; past this many, the memory starts again empty. */
    private final int mostRules;
    /**
     * The rejections remembered, by rule and key. An expired one is dropped when its key asks again, or by a sweep
     * once the memory is full: keys that come and go (an address per request, say) filled it with expired ones, and
     * it stopped remembering for good (a bug a review found).
     */
    private final ConcurrentHashMap<Remembered, Rejection> rejections = new ConcurrentHashMap<>();
    /** The rules rejections are remembered under, so that a key's can be found under each. */
    private final Set<Rule> rules = ConcurrentHashMap.newKeySet();
    /** When the next sweep may be made, on {@link System#nanoTime()}. */
    private final AtomicLong nextSweep = new AtomicLong(System.nanoTime());
    /** Counts up as each reset begins and as it ends: a call that saw it move remembers no rejection. */
    private final AtomicLong resets = new AtomicLong();
    private final LongAdder recalled = new LongAdder();

    /** What a rejection is remembered under. */
    private record Remembered(Rule rule, String key) {
    }

    /** A rejection remembered: of {@code cost} or more, until {@code until} on {@link System#nanoTime()}. */
    private record Rejection(long cost, long until, long at, Decision decision) {
    }

    /**
     * @param on             whether anything is remembered at all
     * @param mostRemembered the most rejections remembered, under every rule together
     * @param mostRules      the most rules remembered under
     */
    RejectionMemory(boolean on, int mostRemembered, int mostRules) {
        this.on = on;
        this.mostRemembered = mostRemembered;
        this.mostRules = mostRules;
    }

    /** The count of resets begun and ended, as a call is sent: what {@link #remember} is then given. */
    long resets() {
        return resets.get();
    }

    private boolean remembers(Rule rule, long cost, long nowNanos) {
        Algorithm algorithm = rule.algorithm();
        return on && nowNanos == Store.STORE_CLOCK && cost > 0
                && (algorithm == Algorithm.FIXED_WINDOW || algorithm == Algorithm.GCRA || algorithm == Algorithm.TOKEN_BUCKET);
    }

    /** The remembered rejection that answers this request, counted down to now; {@code null} if none. */
    Decision recall(Rule rule, String key, long cost, long nowNanos) {
        if (!remembers(rule, cost, nowNanos) || rejections.isEmpty()) {
            return null;
        }
        Remembered under = new Remembered(rule, key);
        Rejection rejection = rejections.get(under);
        if (rejection == null) {
            return null;
        }
        long now = System.nanoTime();
        if (now - rejection.until >= 0) {
            rejections.remove(under, rejection);
            return null;
        }
        if (cost != rejection.cost) {
            // another cost has another retry_after (a greater one may never fit): only Redis knows it
            return null;
        }
        recalled.increment();
        Decision first = rejection.decision;
        long elapsed = now - rejection.at;
        return new Decision(false, first.remaining(), rejection.until - now, Math.max(0, first.resetAfterNanos() - elapsed),
                0, first.limit(), Math.max(0, first.limitResetAfterNanos() - elapsed));
    }

    /**
     * Whether the {@code remaining} of this rejection stays what it is until its {@code retry_after}, so that it can
     * be answered again: a rejection that leaves {@code cost - 1} (every rejection of cost 1), which the limit
     * deciding it leaves until then and no other limit can go under without an admission; or any of a rule of one
     * fixed window, whose remaining changes only as its window ends, at the retry_after. A weighted one of less
     * remaining grows as tokens come back (gcra, token-bucket) or as a shorter window of the rule starts again, and
     * was answered with the remaining of its first rejection: 0 where Redis had 5, and a request of 4 then admitted
     * (a review found it).
     */
    private static boolean holdsItsRemaining(Rule rule, long cost, Decision decision) {
        return decision.remaining() == cost - 1
                || rule.algorithm() == Algorithm.FIXED_WINDOW && rule.limits().size() == 1;
    }

    /**
     * Remembers a rejection Redis answered to a call sent at {@code sent} ({@link System#nanoTime}) when
     * {@link #resets()} was {@code resetsBefore}. None is remembered from a call that a reset overlapped: Redis may
     * have run it before the reset's {@code DEL}, and its rejection would then outlive the reset (a bug a review
     * found: a reset undone for up to an hour). Its retry-after counts from the sending, not from the answer: Redis
     * decided somewhere between the two, and counted from the answer, a rejection was remembered past the moment
     * Redis would admit by however long the answer took to be read (a review found 300 ms, behind a busy
     * continuation on the reading thread).
     */
    Decision remember(Rule rule, String key, long cost, long nowNanos, Decision decision, long resetsBefore,
                      long sent) {
        if (decision.allowed()) {
            if (cost > 0 && !rejections.isEmpty()) {
                // the key was charged: a rejection remembered for another cost now says too much remaining and too
                // short a retry_after (a bug found by trying serve on Redis: obeying its Retry-After met another 429)
                for (Rule each : rules) {
                    Remembered under = new Remembered(each, key);
                    if (rejections.containsKey(under)) { // a lookup, not remove's lock of the bin
                        rejections.remove(under);
                    }
                }
            }
            return decision;
        }
        if (decision.never() || !remembers(rule, cost, nowNanos) || resets.get() != resetsBefore
                || !holdsItsRemaining(rule, cost, decision)) {
            return decision;
        }
        if (!rules.contains(rule)) {
            if (rules.size() >= mostRules) {
                rules.clear();
                rejections.clear();
            }
            rules.add(rule);
        }
        long now = System.nanoTime();
        if (rejections.size() >= mostRemembered) {
            sweep(now);
        }
        if (rejections.size() < mostRemembered && sent + decision.retryAfterNanos() - now > 0) {
            Remembered under = new Remembered(rule, key);
            Rejection rejection = new Rejection(cost, sent + decision.retryAfterNanos(), sent, decision);
            rejections.put(under, rejection);
            long sweepAt = now + SWEEP_NANOS;
            dueBy(rejection.until - sweepAt > 0 ? rejection.until : sweepAt); // by difference, as nanoTime is read
            // a reset began meanwhile, and may have looked before the put; or the memory started again past the most
            // rules, and its rule is no longer among those a reset or an admission looks under, where the rejection
            // would outlive either (a review found five in 42,634 tries)
            if (resets.get() != resetsBefore || !rules.contains(rule)) {
                rejections.remove(under, rejection);
            }
        }
        return decision;
    }

    /**
     * Drops the expired rejections, if one may have expired since the last sweep: a sweep reads every entry, so it
     * waits for the earliest expiry it left, and comes at most ten times a second.
     */
    private void sweep(long now) {
        long due = nextSweep.get();
        if (now - due < 0 || !nextSweep.compareAndSet(due, now + SWEEP_NANOS)) {
            return;
        }
        long earliest = Long.MAX_VALUE;
        for (Map.Entry<Remembered, Rejection> entry : rejections.entrySet()) {
            Rejection rejection = entry.getValue();
            if (now - rejection.until >= 0) {
                rejections.remove(entry.getKey(), rejection);
            } else if (rejection.until - now < earliest) {
                earliest = rejection.until - now;
            }
        }
        nextSweep.set(now + Math.max(SWEEP_NANOS, earliest == Long.MAX_VALUE ? 0 : earliest));
    }

    /**
     * Brings the next sweep forward to {@code when} if it was later: a rejection remembered after a sweep may expire
     * before those the sweep left (a review found a full memory waiting out the longest of them).
     */
    private void dueBy(long when) {
        nextSweep.accumulateAndGet(when, (due, earlier) -> earlier - due < 0 ? earlier : due);
    }

    /**
     * Called as a reset of {@code key} begins and again as it ends: a call answered between the two remembers
     * nothing, and what was remembered before either is forgotten.
     */
    void resetting(String key) {
        resets.incrementAndGet();
        forget(key);
    }

    /**
     * Forgets the rejections of {@code key} under every rule: a limiter's acquire remembers rejections under its
     * delaying rules too (one key, one state, whatever rule read it), and a reset must forget them all.
     */
    private void forget(String key) {
        for (Rule each : rules) {
            rejections.remove(new Remembered(each, key));
        }
    }

    /** How many rules have rejections remembered under them (at most {@code mostRules}). */
    int rules() {
        return rules.size();
    }

    /** How many rejections are remembered, under every rule together (at most {@code mostRemembered}). */
    int remembered() {
        return rejections.size();
    }

    /** How many decisions were answered from memory, without Redis. */
    long recalled() {
        return recalled.sum();
    }
}
