package dev.sluice;

/**
 * The time of a request, in nanoseconds since the Unix epoch, never running backwards.
 *
 * <p>Limiters read the clock once per decision. {@link #system()} is the production clock; tests and
 * {@code sluice simulate} use {@link ManualClock}.
 */
@FunctionalInterface
public interface Clock {
    /** Nanoseconds since the Unix epoch; never less than an earlier reading. */
    long nanos();

    /**
     * The wall clock read once, then advanced by {@link System#nanoTime()}: windows line up with the wall
     * clock (a {@code 1m} window starts on the minute) and an NTP step never moves time backwards.
     */
    static Clock system() {
        return SystemClock.INSTANCE;
    }
}
