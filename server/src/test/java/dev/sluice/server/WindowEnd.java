package dev.sluice.server;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a fixed window aligned to the epoch says over real time: a request made between {@code before} and
 * {@code after} (wall-clock milliseconds read around it) waits until its window's end, {@code P − t mod P}. The
 * server's clock is the wall clock read once and advanced by a monotonic one, so a little slack either side.
 */
public final class WindowEnd {
    /** How far the server's clock may stray from the test's wall-clock readings over a test. */
    private static final long SLACK_MS = 200;

    private WindowEnd() {
    }

    /**
     * Waits for the wall clock's next minute if this one has less than 3 s left: a test of counts in windows of a
     * minute (Envoy's units) begun in its last seconds saw its counts start again halfway (a CI run: remaining 3
     * where 1 was left).
     */
    public static void awaitFreshMinute() throws InterruptedException {
        awaitFreshWindow(60_000, 3_000);
    }

    /**
     * Waits, if less than {@code leastMs} is left of the window of {@code periodMs} aligned to the epoch now, for the
     * next one to begin, so that what a test does next falls in one window.
     */
    public static void awaitFreshWindow(long periodMs, long leastMs) throws InterruptedException {
        long toTheEnd = periodMs - System.currentTimeMillis() % periodMs;
        if (toTheEnd < leastMs) {
            Thread.sleep(toTheEnd + 20);
        }
    }

    /**
     * Asserts that {@code reset} is the wait to the end of a window of {@code periodMs} in whole seconds rounded up,
     * as Envoy's answers give it.
     */
    public static void assertSecondsUntilWindowEnd(com.google.protobuf.Duration reset, long periodMs, long before,
                                                   long after) {
        assertThat(reset.getNanos()).as("whole seconds").isZero();
        long actualMs = reset.getSeconds() * 1000;
        if (before / periodMs != after / periodMs) {
            assertThat(actualMs).isBetween(0L, periodMs);
            return;
        }
        assertThat(actualMs).as("the end of the %d ms window in seconds rounded up, asked between %d and %d", periodMs,
                before, after).isBetween(periodMs - after % periodMs - SLACK_MS, periodMs - before % periodMs + 999 + SLACK_MS);
        assertThat(actualMs).isGreaterThanOrEqualTo(1000);
    }

    /** Asserts that {@code actualMs} is the wait, in milliseconds rounded up, to the end of a window of {@code periodMs}. */
    public static void assertUntilWindowEnd(long actualMs, long periodMs, long before, long after) {
        if (before / periodMs != after / periodMs) { // a window ended while the request was on its way
            assertThat(actualMs).isBetween(0L, periodMs);
            return;
        }
        assertThat(actualMs).as("the end of the %d ms window, asked between %d and %d", periodMs, before, after)
                .isBetween(periodMs - after % periodMs - SLACK_MS, periodMs - before % periodMs + SLACK_MS);
    }
}
