package dev.sluice.redis;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.Store;
import dev.sluice.store.StoreUnavailableException;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;

import java.util.Locale;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * What a store does with the calls Redis does not answer: it counts them, tells the breaker, logs the change, and
 * decides them by the {@link FailurePolicy}, or raises them for a tool that asked ({@code raiseFailures}). No
 * failure of Redis ever throws into the request path otherwise.
 */
final class Outages {
    private static final System.Logger LOG = System.getLogger("dev.sluice.redis");
    /** The least time between two lines of a failure. */
    static final long QUIET_NANOS = 10_000_000_000L;
    private static final long NEVER = Long.MIN_VALUE;

    /** Changed while deciding by {@link RedisStore#onFailure(FailurePolicy)}. */
    private volatile FailurePolicy policy;
    private final boolean raise;
    private final long timeoutNanos;
    /** The store's address, its password hidden, for the log. */
    private final String shownUri;
    /** Told each time a breaker opens: a Cluster asks its topology again. */
    private final Runnable breakerOpened;
    private final LongAdder failures = new LongAdder();
    private final LongAdder timeouts = new LongAdder();
    private final LongAdder failedOpen = new LongAdder();
    private final LongAdder failedClosed = new LongAdder();
    private final LongAdder shortCircuited = new LongAdder();
    private final LongAdder breakerOpenings = new LongAdder();
    private final LongAdder scriptReloads = new LongAdder();
    /** The kind of the last failure, while decisions fail; null while they succeed. Written under this. */
    private volatile String failing;
    /** Whether the log told of {@link #failing}. Guarded by this. */
    private volatile boolean failingTold;
    /** When the last line of a failure was written, by {@link #nanoTime}; {@link #NEVER} before. Guarded by this. */
    private long failureLineNanos = NEVER;
    /** The failures (a new one, or a change of kind) not told since that line. Guarded by this. */
    private long untold;
    /**
     * Whether the last line said decisions fail: the next success is told then, even when the failure going on
     * was not told (a change of kind within the quiet), so that a success is never lost (the diff review found the
     * log saying "fail" for good while decisions succeeded). Guarded by this.
     */
    private boolean lastSaidFailing;
    private final LongSupplier nanoTime;

    Outages(FailurePolicy policy, boolean raise, long timeoutNanos, String shownUri, Runnable breakerOpened) {
        this(policy, raise, timeoutNanos, shownUri, breakerOpened, System::nanoTime);
    }

    /** With the time read from {@code nanoTime}, for tests. */
    Outages(FailurePolicy policy, boolean raise, long timeoutNanos, String shownUri, Runnable breakerOpened,
            LongSupplier nanoTime) {
        this.policy = policy;
        this.raise = raise;
        this.timeoutNanos = timeoutNanos;
        this.shownUri = shownUri;
        this.breakerOpened = breakerOpened;
        this.nanoTime = nanoTime;
    }

    void policy(FailurePolicy policy) {
        this.policy = policy;
    }

    RedisStore.Counts counts(long localRejections) {
        return new RedisStore.Counts(failures.sum(), timeouts.sum(), failedOpen.sum(), failedClosed.sum(),
                shortCircuited.sum(), breakerOpenings.sum(), scriptReloads.sum(), localRejections);
    }

    /** A script sent whole, after a server answered {@code NOSCRIPT}. */
    void scriptReloaded() {
        scriptReloads.increment();
    }

    /**
     * A decision not sent because {@code breaker} is open: the failure policy's.
     *
     * @throws StoreUnavailableException for a tool that asked for failures
     */
    Decision shortCircuited(Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        shortCircuited.increment();
        if (raise) { // a tool that asked for failures gets one, not the policy's decision
            throw new StoreUnavailableException("Redis is not being asked: its circuit breaker opened after "
                    + breaker.threshold() + " failures in a row; it is tried again in "
                    + DurationFormat.toMillisCeil(breaker.nanosUntilRetry()) + "ms", null);
        }
        return fallback(rule, cost, nowNanos, breaker);
    }

    /**
     * A decision whose call Redis did not answer: counted, and decided by the failure policy.
     *
     * @throws StoreUnavailableException for a tool that asked for failures
     */
    Decision failed(Throwable failure, Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        counted(failure, breaker);
        if (raise) {
            throw unavailable(failure);
        }
        return fallback(rule, cost, nowNanos, breaker);
    }

    /** A call Redis answered: the breaker closes, and the log says so if its last line was of a failure. */
    void succeeded(CircuitBreaker breaker) {
        breaker.succeeded();
        if (failing != null) { // a read per decision; a lock once they fail
            synchronized (this) {
                if (lastSaidFailing) {
                    LOG.log(System.Logger.Level.INFO, "Redis store " + shownUri + ": decisions succeed again");
                    lastSaidFailing = false;
                }
                failing = null;
                failingTold = false;
            }
        }
    }

    /** Counts a call Redis did not answer, as a failure, a timeout if it was one, and in the breaker. */
    void counted(Throwable failure, CircuitBreaker breaker) {
        failures.increment();
        Throwable cause = failure.getCause() != null && !(failure instanceof RedisCommandTimeoutException)
                ? failure.getCause() : failure;
        if (!raise) { // a tool that asked for failures tells them itself
            logged(cause);
        }
        if (failure instanceof RedisCommandTimeoutException || cause instanceof RedisCommandTimeoutException
                || failure instanceof TimeoutException) {
            timeouts.increment();
        }
        if (breaker.failed(failure)) {
            opened();
        }
    }

    /** A breaker opened: counted, and in a Cluster the topology asked again. */
    void opened() {
        breakerOpenings.increment();
        breakerOpened.run();
    }

    /**
     * A call that failed, raised: Redis answered it with an error ({@code READONLY}, {@code OOM}, {@code MOVED}: a
     * review found those told as "did not answer"), or did not answer it (a timeout, a connection lost).
     */
    static StoreUnavailableException unavailable(Throwable failure) {
        return new StoreUnavailableException((failure instanceof RedisCommandExecutionException
                ? "Redis refused the call: " : "Redis did not answer: ") + failure.getMessage(), failure);
    }

    /**
     * Logs why decisions fail, once for each change of its kind (a timeout, Redis's {@code NOPERM}, {@code OOM},
     * {@code READONLY}, a connection lost), and {@link #succeeded} once they succeed again. A review found nothing
     * logged at all while every decision failed open, for a user without rights, a full Redis, a restart.
     *
     * <p>One such line every {@link #QUIET_NANOS} at most: a Redis whose answers hover about the timeout, or a
     * Cluster of one master down among others that answer, fails and succeeds by turns, and each turn wrote two
     * lines, hundreds a second (a review). A failure not told is counted in the next line, and a success after it
     * is not told either, so the last line always says how decisions fare, within 10 s.
     */
    private void logged(Throwable failure) {
        String message = String.valueOf(failure.getMessage());
        String kind = failure.getClass().getSimpleName() + " " + message.split("[ :]", 2)[0];
        if (kind.equals(failing) && failingTold) {
            return; // told: the usual case while a Redis is down, read without the lock
        }
        synchronized (this) {
            boolean changed = !kind.equals(failing);
            failing = kind;
            if (!changed && failingTold) {
                return;
            }
            long now = nanoTime.getAsLong();
            if (failureLineNanos != NEVER && now - failureLineNanos < QUIET_NANOS) {
                untold += changed ? 1 : 0;
                failingTold = false;
                return;
            }
            LOG.log(System.Logger.Level.WARNING, "Redis store " + shownUri + ": decisions fail, decided by the"
                    + " failure policy (" + policy.name().toLowerCase(Locale.ROOT) + "): " + message
                    + "; told again when the failure changes, and when decisions succeed again"
                    + (untold == 0 ? "" : " (" + untold + " failure" + (untold == 1 ? "" : "s") + " or change"
                    + (untold == 1 ? "" : "s") + " of kind not told since the last such line, one a "
                    + QUIET_NANOS / 1_000_000_000L + " s at most)"));
            failureLineNanos = now;
            failingTold = true;
            lastSaidFailing = true;
            untold = 0;
        }
    }

    /** The decision of the failure policy: admitted as an untouched key, or rejected until the next try. */
    private Decision fallback(Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        long now = nowNanos == Store.STORE_CLOCK ? Clock.system().nanos() : nowNanos;
        if (policy == FailurePolicy.OPEN) {
            failedOpen.increment();
            Decision untouched = rule.decide(null, now, cost).decision();
            return new Decision(untouched.allowed(), untouched.remaining(), untouched.retryAfterNanos(),
                    untouched.resetAfterNanos(), untouched.delayNanos(), untouched.limit(),
                    untouched.limitResetAfterNanos(), true);
        }
        failedClosed.increment();
        long retryAfter = Math.max(breaker.nanosUntilRetry(), timeoutNanos);
        // reset_after as long as retry_after: nothing is known of the key before Redis is asked again, and a reset
        // of 0 told clients the limit was back (RateLimit's t=0, X-RateLimit-Reset: 0; a bug a review found)
        return new Decision(false, 0, retryAfter, retryAfter, 0, rule.limits().get(0), retryAfter, true);
    }
}
