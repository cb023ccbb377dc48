package dev.sluice.redis;

import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

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
    private final AtomicInteger failures = new AtomicInteger();
    private final AtomicBoolean probing = new AtomicBoolean();
    private volatile boolean open;
    private volatile long openUntil;
    /** The failures counted, by identity (a Throwable's equals), while anything still holds them. */
    private final Set<Throwable> counted = Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

    CircuitBreaker(int threshold, long openNanos) {
        this.threshold = threshold;
        this.openNanos = openNanos;
    }

    /** Whether a call may go to the store now: the breaker is closed, or this call is the probe. */
    boolean allows() {
        if (!open) {
            return true;
        }
        return System.nanoTime() - openUntil >= 0 && probing.compareAndSet(false, true);
    }

    /** The wait until the store is tried again (0 while the breaker is closed). */
    long nanosUntilRetry() {
        return open ? Math.max(0, openUntil - System.nanoTime()) : 0;
    }

    /**
     * Records a success. Called on every decision by every thread, so it writes only what changes: three
     * writes each time made every caller pull the same cache line from the others.
     */
    void succeeded() {
        if (failures.get() != 0) {
            failures.set(0);
        }
        if (open) {
            open = false;
        }
        if (probing.get()) {
            probing.set(false);
        }
    }

    /** Records a decision that failed with {@code failure}; whether it opened the breaker. */
    boolean failed(Throwable failure) {
        if (!counted.add(failure)) {
            return false; // another decision of the same failed call, counted already
        }
        boolean probe = probing.getAndSet(false);
        if (probe || (failures.incrementAndGet() >= threshold && !open)) {
            openUntil = System.nanoTime() + openNanos;
            open = true;
            return !probe;
        }
        return false;
    }

    boolean isOpen() {
        return open;
    }

    int threshold() {
        return threshold;
    }

    long openNanos() {
        return openNanos;
    }
}
