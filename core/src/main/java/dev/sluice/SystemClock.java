package dev.sluice;

import java.time.Instant;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * {@link Clock#system()}: the wall clock read once, at start, and advanced by the monotonic clock, so that a step of
 * the wall clock (NTP, an operator) never moves a limiter's time back, nor forward by more than time has passed.
 */
final class SystemClock implements Clock {
    static final SystemClock INSTANCE = new SystemClock(Instant::now, System::nanoTime);

    private final LongSupplier monotonic;
    private final long epochNanosAtStart;
    private final long monotonicAtStart;

    /** On the given wall and monotonic clocks: the machine's, or a test's. */
    SystemClock(Supplier<Instant> wall, LongSupplier monotonic) {
        Instant now = wall.get();
        this.monotonic = monotonic;
        this.monotonicAtStart = monotonic.getAsLong();
        this.epochNanosAtStart = now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    @Override
    public long nanos() {
        return epochNanosAtStart + (monotonic.getAsLong() - monotonicAtStart);
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
