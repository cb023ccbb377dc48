package dev.sluice.redis;

import dev.sluice.store.FailurePolicy;
import dev.sluice.testkit.LogCapture;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the log says of failing decisions. A review found a Redis whose answers hover about the timeout, or a Cluster
 * with one master down among masters that answer, fail and succeed by turns, each turn two lines: hundreds a second.
 * A line of failure now comes 10 s after the last at the soonest, and a success is told only after a failure told.
 */
class OutagesTest {
    private static final String SHOWN = "redis://:****@127.0.0.1:6379";
    private final AtomicLong now = new AtomicLong(1_000);
    private final Outages outages = new Outages(FailurePolicy.OPEN, false, TimeUnit.MILLISECONDS.toNanos(50), SHOWN,
            () -> { }, now::get);
    private final CircuitBreaker breaker = new CircuitBreaker(1_000, TimeUnit.SECONDS.toNanos(1));

    private static RedisCommandTimeoutException timeout() {
        return new RedisCommandTimeoutException("Command timed out after 50 millisecond(s)");
    }

    @Test
    void aFailureIsToldOnceAndItsEndOnce() {
        try (LogCapture log = LogCapture.of("dev.sluice.redis")) {
            for (int i = 0; i < 5; i++) {
                outages.counted(timeout(), breaker);
            }
            outages.succeeded(breaker);
            outages.succeeded(breaker);
            assertThat(log.messages()).containsExactly("Redis store " + SHOWN
                    + ": decisions fail, decided by the failure policy (open): Command timed out after 50"
                    + " millisecond(s); told again when the failure changes, and when decisions succeed again",
                    "Redis store " + SHOWN + ": decisions succeed again");
        }
    }

    @Test
    void failuresBetweenSuccessesAreToldOnceEveryTenSecondsAndCounted() {
        try (LogCapture log = LogCapture.of("dev.sluice.redis")) {
            for (int turn = 0; turn < 200; turn++) { // 2 s of a failure and a success every 10 ms
                outages.counted(timeout(), breaker);
                outages.succeeded(breaker);
                now.addAndGet(TimeUnit.MILLISECONDS.toNanos(10));
            }
            assertThat(log.messages()).as("the first turn's two lines, and no more").hasSize(2);
            now.set(1_000 + Outages.QUIET_NANOS - 1);
            outages.counted(timeout(), breaker);
            assertThat(log.messages()).as("1 ns short of 10 s after the first").hasSize(2);
            now.set(1_000 + Outages.QUIET_NANOS);
            outages.counted(timeout(), breaker); // still failing, untold: told now
            assertThat(log.messages()).hasSize(3);
            assertThat(log.messages().get(2)).startsWith("Redis store " + SHOWN + ": decisions fail, ")
                    .endsWith(" (200 failures or changes of kind not told since the last such line, one a 10 s at"
                            + " most)");
            outages.succeeded(breaker);
            assertThat(log.messages()).hasSize(4);
            assertThat(log.messages().get(3)).isEqualTo("Redis store " + SHOWN + ": decisions succeed again");
        }
    }

    @Test
    void aFailureGoingOnAfterTurnsIsToldWithinTenSeconds() {
        try (LogCapture log = LogCapture.of("dev.sluice.redis")) {
            outages.counted(timeout(), breaker);
            outages.succeeded(breaker);
            now.addAndGet(TimeUnit.SECONDS.toNanos(1));
            outages.counted(timeout(), breaker); // failing again, for good: not told yet, the last line says success
            assertThat(log.messages()).hasSize(2);
            for (int i = 0; i < 100; i++) {
                now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
                outages.counted(timeout(), breaker);
            }
            assertThat(log.messages()).as("told once 10 s have passed since the first line").hasSize(3);
            assertThat(log.messages().get(2)).contains(": decisions fail, ").endsWith(" (1 failure or change of kind"
                    + " not told since the last such line, one a 10 s at most)");
        }
    }

    /**
     * A change of kind within the quiet is not told; the success after it is, since the last line said decisions fail
     * (the diff review found the success lost, the log saying "fail" for good).
     */
    @Test
    void aSuccessAfterAChangeNotToldIsToldAllTheSame() {
        try (LogCapture log = LogCapture.of("dev.sluice.redis")) {
            outages.counted(timeout(), breaker);
            now.addAndGet(TimeUnit.SECONDS.toNanos(1));
            outages.counted(new RedisCommandExecutionException("LOADING Redis is loading the dataset in memory"),
                    breaker);
            now.addAndGet(TimeUnit.SECONDS.toNanos(1));
            outages.succeeded(breaker);
            assertThat(log.messages()).hasSize(2);
            assertThat(log.messages().get(1)).isEqualTo("Redis store " + SHOWN + ": decisions succeed again");
            outages.succeeded(breaker);
            assertThat(log.messages()).as("told once").hasSize(2);
        }
    }

    @Test
    void aChangeOfKindIsToldOnceTheQuietHasPassed() {
        try (LogCapture log = LogCapture.of("dev.sluice.redis")) {
            outages.counted(timeout(), breaker);
            now.addAndGet(TimeUnit.SECONDS.toNanos(1));
            RedisCommandExecutionException oom = new RedisCommandExecutionException(
                    "OOM command not allowed when used memory > 'maxmemory'.");
            outages.counted(oom, breaker);
            assertThat(log.messages()).as("a change of kind 1 s after a line").hasSize(1);
            now.addAndGet(Outages.QUIET_NANOS);
            outages.counted(oom, breaker);
            assertThat(log.messages()).hasSize(2);
            assertThat(log.messages().get(1)).contains("(open): OOM command not allowed");
            outages.counted(oom, breaker);
            assertThat(log.messages()).as("the same kind, told").hasSize(2);
        }
    }
}
