package dev.sluice;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** A clock that moves only when told to: for tests and {@code sluice simulate}. Thread-safe. */
public final class ManualClock implements Clock {
    private final AtomicLong nanos;

    /** A clock standing at {@code nanos} since the epoch (not before it). */
    public ManualClock(long nanos) {
        if (nanos < 0) {
            throw new IllegalArgumentException("time must be >= 0ns since the epoch, got " + nanos + "ns");
        }
        this.nanos = new AtomicLong(nanos);
    }

    /** A clock standing at the epoch, {@code t = 0}. */
    public ManualClock() {
        this(0);
    }

    @Override
    public long nanos() {
        return nanos.get();
    }

    /** Sets the time; it may not go backwards. */
    public void set(long nanos) {
        long before = this.nanos.getAndAccumulate(nanos, Math::max);
        if (nanos < before) {
            throw new IllegalArgumentException("time may not go backwards: " + nanos + "ns is before " + before + "ns");
        }
    }

    public void advance(Duration duration) {
        if (duration == null) {
            throw new IllegalArgumentException("duration must not be null");
        }
        advanceNanos(DurationFormat.saturatedNanos(duration));
    }

    public void advanceNanos(long nanos) {
        if (nanos < 0) {
            throw new IllegalArgumentException("time may not go backwards: advance by " + nanos + "ns");
        }
        long before = this.nanos.getAndUpdate(now -> now + nanos < 0 ? now : now + nanos);
        if (before + nanos < 0) {
            throw new IllegalArgumentException("time would pass the last nanosecond a long holds: " + before
                    + "ns advanced by " + nanos + "ns");
        }
    }

    @Override
    public String toString() {
        return "ManualClock(" + nanos.get() + "ns)";
    }
}
