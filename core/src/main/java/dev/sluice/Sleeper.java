package dev.sluice;

import java.util.concurrent.TimeUnit;

/**
 * How a blocking call waits: {@link #system()} parks the thread; tests pair a {@link ManualClock} with a
 * sleeper that advances it, so that waiting takes no time.
 */
@FunctionalInterface
public interface Sleeper {
    /** Waits {@code nanos}; interruptible. */
    void sleep(long nanos) throws InterruptedException;

    /** Sleeps the calling thread. */
    static Sleeper system() {
        return TimeUnit.NANOSECONDS::sleep;
    }

    /** Advances {@code clock} instead of sleeping. */
    static Sleeper advancing(ManualClock clock) {
        return clock::advanceNanos;
    }
}
