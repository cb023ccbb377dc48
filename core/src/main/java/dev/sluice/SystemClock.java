package dev.sluice;

import java.time.Instant;

/** {@link Clock#system()}: the wall clock at start, advanced by the monotonic clock. */
final class SystemClock implements Clock {
    static final SystemClock INSTANCE = new SystemClock();

    private final long epochNanosAtStart;
    private final long monotonicAtStart;

    private SystemClock() {
        Instant now = Instant.now();
        this.monotonicAtStart = System.nanoTime();
        this.epochNanosAtStart = now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    @Override
    public long nanos() {
        return epochNanosAtStart + (System.nanoTime() - monotonicAtStart);
    }

    /** The {@link System#nanoTime()} reading at which this clock shows {@code epochNanos}. */
    long toNanoTime(long epochNanos) {
        return monotonicAtStart + (epochNanos - epochNanosAtStart);
    }

    @Override
    public String toString() {
        return "Clock.system()";
    }
}
