package dev.sluice.redis;

import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Stops calling a store that keeps failing, so that while it is down each decision costs microseconds, not a
 * timeout: after {@code threshold} failures in a row the breaker opens for {@code openNanos}; then one call
 * (the probe) goes through, and its success closes the breaker, its failure opens it again. A failure is
 * one call of the store that failed: the decisions that failed with one call (a batch of them, or those that
 * timed out at one instant) share its exception, and count once.
 */
final class CircuitBreaker {
    private final int threshold;
    private final long openNanos;
    /** {@link System#nanoTime()}, or a test's clock: a test on the machine's clock was at the mercy of its pauses. */
    private final java.util.function.LongSupplier nanoTime;
    private final AtomicInteger failures = new AtomicInteger();
    private final AtomicBoolean probing = new AtomicBoolean();
    private final AtomicBoolean open = new AtomicBoolean();
    private volatile long openUntil;
    /** Closed on trial by a PING ({@link #pinged}): one failure short of opening until a success ends the trial. */
    private volatile boolean onTrial;
    /** When the store's health may next be checked with a call of its own ({@link #healthCheckDue}). */
    private final AtomicLong nextHealthCheck;
    private static final long HEALTH_CHECK_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);
    /** The failures counted, by identity (a Throwable's equals), while anything still holds them. */
    private final Set<Throwable> counted = Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

    CircuitBreaker(int threshold, long openNanos) {
        this(threshold, openNanos, System::nanoTime);
    }

    CircuitBreaker(int threshold, long openNanos, java.util.function.LongSupplier nanoTime) {
        this.threshold = threshold;
        this.openNanos = openNanos;
        this.nanoTime = nanoTime;
        this.nextHealthCheck = new AtomicLong(nanoTime.getAsLong());
    }

    /** Whether a call may go to the store now: the breaker is closed, or this call is the probe. */
    boolean allows() {
        if (!open.get()) {
            return true;
        }
        if (nanoTime.getAsLong() - openUntil < 0 || !probing.compareAndSet(false, true)) {
            return false;
        }
        if (!open.get()) { // closed by a success meanwhile: no probe is left behind on a closed breaker
            probing.set(false);
        }
        return true;
    }

    /**
     * Claims the probe of an open breaker due for a retry, for a health check: true for one caller only; false while
     * closed, unlike {@link #allows}, so that a check sent while closed is never taken for the probe (a review found
     * one, sent as a decision closed the breaker and answered after it opened again, closing the new opening).
     */
    boolean claimProbe() {
        if (!open.get() || nanoTime.getAsLong() - openUntil < 0 || !probing.compareAndSet(false, true)) {
            return false;
        }
        if (!open.get()) { // closed by a success meanwhile
            probing.set(false);
            return false;
        }
        return true;
    }

    /** The wait until the store is tried again (0 while the breaker is closed). */
    long nanosUntilRetry() {
        return open.get() ? Math.max(0, openUntil - nanoTime.getAsLong()) : 0;
    }

    /**
     * Records a success. Called on every decision by every thread, so it writes only what changes: three
     * writes each time made every caller pull the same cache line from the others.
     */
    void succeeded() {
        if (failures.get() != 0) {
            failures.set(0);
        }
        if (onTrial) {
            onTrial = false;
        }
        if (open.get()) {
            open.set(false);
        }
        if (probing.get()) {
            probing.set(false);
        }
    }

    /**
     * Records a decision that failed with {@code failure}; whether it opened the breaker (again, when it is the
     * probe that failed: each wait of openNanos is an opening, as an operator counting them expects while the
     * store stays down), true for one caller only however many fail at once (a bug a review found: two failing together both saw the threshold reached
     * and the breaker closed, and an opening was counted twice). The wait is set before the breaker opens, so
     * that no caller sees it open with the wait of an opening before.
     */
    boolean failed(Throwable failure) {
        if (!counted.add(failure)) {
            return false; // another decision of the same failed call, counted already
        }
        if (probing.get()) {
            // the new wait before the probe is let go of: a caller that sees no probe sees this wait, not the old,
            // past one, and does not start a second probe at once (a review found it)
            openUntil = nanoTime.getAsLong() + openNanos;
        }
        if (probing.getAndSet(false)) {
            open.set(true);
            return true; // the probe failed: the breaker opens again for openNanos, an opening as the first was
        }
        if (failures.incrementAndGet() >= threshold && !open.get()) {
            openUntil = nanoTime.getAsLong() + openNanos;
            return open.compareAndSet(false, true);
        }
        return false;
    }

    /**
     * Records a health check's {@code PING} answered, sent as the probe of the open breaker or not. A store that
     * answers {@code PING} may still fail every decision (out of memory, its scripts refused by an ACL, a read-only
     * replica): so it clears no failures in a row of a closed breaker, and an open one its probe closes on trial
     * only, one failure short of opening again, so that the next decision that fails opens it at once; a second PING
     * answered, or a decision, ends the trial. A review found a closed breaker's count cleared by every check, once a
     * second: decisions that all failed, a second apart, never opened it, and the store was called healthy.
     */
    void pinged(boolean probe) {
        if (open.get()) {
            if (!probe) {
                return; // sent while closed, answered after the breaker opened: no probe, and the wait stands
            }
            failures.set(threshold - 1);
            onTrial = true;
            nextHealthCheck.set(nanoTime.getAsLong() + HEALTH_CHECK_NANOS); // the trial's check comes a second later
            open.set(false);
        } else if (onTrial) {
            // a second PING answered, no decision failed between: the trial is over (else, on a quiet store, one
            // failed check hours later opened the breaker at once: the review of this change found it)
            onTrial = false;
            failures.set(0);
        }
        if (probe && probing.get()) {
            probing.set(false);
        }
    }

    /**
     * Whether the caller is to check the store's health now, with a call that counts as a decision's: true at most
     * once a second, to one caller.
     */
    boolean healthCheckDue() {
        long now = nanoTime.getAsLong();
        long due = nextHealthCheck.get();
        return now - due >= 0 && nextHealthCheck.compareAndSet(due, now + HEALTH_CHECK_NANOS);
    }

    boolean isOpen() {
        return open.get();
    }

    int threshold() {
        return threshold;
    }

    long openNanos() {
        return openNanos;
    }
}
