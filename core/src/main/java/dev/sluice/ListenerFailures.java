package dev.sluice;

import java.util.function.LongSupplier;

/**
 * The failures of the {@link DecisionListener}s of one class, as the log tells them: the first with its stack trace,
 * then one a minute at most, with the count of those left out. A listener failing at every decision (a bug of its own)
 * wrote a stack trace per decision, thousands a second (a review). The decision stands either way.
 */
final class ListenerFailures {
    private static final System.Logger LOG = System.getLogger(RateLimiter.class.getName());
    /** The least time between two lines. */
    static final long QUIET_NANOS = 60_000_000_000L;

    private final LongSupplier nanoTime;
    /** Whether a line was written, and when. Guarded by this. */
    private boolean said;
    private long saidNanos;
    /** The failures left out since that line. Guarded by this. */
    private long untold;

    ListenerFailures() {
        this(System::nanoTime);
    }

    /** With the time read from {@code nanoTime}, for tests. */
    ListenerFailures(LongSupplier nanoTime) {
        this.nanoTime = nanoTime;
    }

    /** A listener threw {@code failure}: logged, unless a line was written less than a minute ago. */
    void failed(RuntimeException failure) {
        long left;
        synchronized (this) {
            long now = nanoTime.getAsLong();
            if (said && now - saidNanos < QUIET_NANOS) {
                untold++;
                return;
            }
            said = true;
            saidNanos = now;
            left = untold;
            untold = 0;
        }
        LOG.log(System.Logger.Level.WARNING, "a decision listener failed; the decision stands" + (left == 0 ? ""
                : " (" + left + " more failure" + (left == 1 ? "" : "s") + " of listeners since the last line, not"
                + " logged: one line a minute at most)"), failure);
    }
}
