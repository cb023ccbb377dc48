package dev.sluice.redis;

import io.netty.util.Timeout;
import org.junit.jupiter.api.Test;

import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DeadlineTimerTest {
    @Test
    void aTimeoutRunsAtItsDeadlineNotAtATick() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            AtomicLong ranAt = new AtomicLong();
            CountDownLatch ran = new CountDownLatch(1);
            long start = System.nanoTime();
            Timeout timeout = timer.newTimeout(t -> {
                ranAt.set(System.nanoTime());
                ran.countDown();
            }, 30, TimeUnit.MILLISECONDS);
            assertThat(ran.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(ranAt.get() - start).isGreaterThanOrEqualTo(30_000_000L).isLessThan(130_000_000L);
            assertThat(timeout.isExpired()).isTrue();
            assertThat(timeout.cancel()).isFalse();
            assertThat(timeout.task()).isNotNull();
            assertThat(timeout.timer()).isSameAs(timer);
        } finally {
            timer.stop();
        }
    }

    @Test
    void aCancelledTimeoutNeverRuns() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            AtomicInteger runs = new AtomicInteger();
            CountDownLatch later = new CountDownLatch(1);
            // 200 ms: a busy machine may stall between making it and cancelling it (a review found 10 ms tight)
            Timeout cancelled = timer.newTimeout(t -> runs.incrementAndGet(), 200, TimeUnit.MILLISECONDS);
            assertThat(cancelled.cancel()).isTrue();
            assertThat(cancelled.cancel()).isFalse();
            timer.newTimeout(t -> later.countDown(), 300, TimeUnit.MILLISECONDS);
            assertThat(later.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(runs).hasValue(0);
            assertThat(cancelled.isCancelled()).isTrue();
            assertThat(cancelled.isExpired()).isFalse();
        } finally {
            timer.stop();
        }
    }

    /** The thread sleeps for the later deadline when the earlier one is added: it must be woken for it. */
    @Test
    void anEarlierDeadlineAddedWhileTheThreadSleepsForALaterOneRunsOnTime() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            timer.newTimeout(t -> { }, 1, TimeUnit.HOURS);
            Thread.sleep(50); // the thread has taken it in and sleeps for an hour
            CountDownLatch ran = new CountDownLatch(1);
            long start = System.nanoTime();
            timer.newTimeout(t -> ran.countDown(), 20, TimeUnit.MILLISECONDS);
            assertThat(ran.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(System.nanoTime() - start).isLessThan(1_000_000_000L);
        } finally {
            timer.stop();
        }
    }

    /** A past weakness: the wheel timer before it woke 400 times a second on a store that decided nothing. */
    @Test
    void anIdleTimerDoesNotWake() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            CountDownLatch ran = new CountDownLatch(1);
            timer.newTimeout(t -> ran.countDown(), 5, TimeUnit.MILLISECONDS);
            timer.newTimeout(t -> { }, 20, TimeUnit.MILLISECONDS).cancel();
            assertThat(ran.await(5, TimeUnit.SECONDS)).isTrue();
            Thread.sleep(100); // past the cancelled one's deadline
            int wakes = timer.wakes();
            Thread.sleep(300);
            assertThat(timer.wakes()).isEqualTo(wakes);
        } finally {
            timer.stop();
        }
    }

    /** Commands answered in time: their timeouts cancelled, the thread woken only to let go of them. */
    @Test
    void timeoutsCancelledBeforeTheirDeadlineWakeTheThreadOnlyToLetGoOfThem() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            int commands = 10 * DeadlineTimer.PURGE_EVERY;
            timer.newTimeout(t -> { }, 1, TimeUnit.HOURS);
            Thread.sleep(50); // the thread has taken it in and sleeps for it
            int before = timer.wakes();
            for (int i = 0; i < commands; i++) {
                timer.newTimeout(t -> { }, 1, TimeUnit.SECONDS).cancel();
            }
            // once per PURGE_EVERY added, and a few times more as the first one (due sooner than the hour) woke it and
            // the adders raced the thread's new wake-up time: not once a command
            assertThat(timer.wakes() - before).isLessThanOrEqualTo(commands / DeadlineTimer.PURGE_EVERY + 6);
        } finally {
            timer.stop();
        }
    }

    @Test
    void aTaskThatThrowsDoesNotStopTheTimer() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            timer.newTimeout(t -> {
                throw new IllegalStateException("a task failing on purpose");
            }, 1, TimeUnit.MILLISECONDS);
            CountDownLatch ran = new CountDownLatch(1);
            timer.newTimeout(t -> ran.countDown(), 30, TimeUnit.MILLISECONDS);
            assertThat(ran.await(5, TimeUnit.SECONDS)).isTrue();
        } finally {
            timer.stop();
        }
    }

    /** A task that leaves the timer's thread interrupted: park() would return at once, round after round. */
    @Test
    void aTaskThatInterruptsTheThreadDoesNotSetItSpinning() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        try {
            CountDownLatch interrupted = new CountDownLatch(1);
            timer.newTimeout(t -> {
                Thread.currentThread().interrupt();
                interrupted.countDown();
            }, 1, TimeUnit.MILLISECONDS);
            assertThat(interrupted.await(5, TimeUnit.SECONDS)).isTrue();
            Thread.sleep(50);
            int wakes = timer.wakes();
            Thread.sleep(200);
            assertThat(timer.wakes() - wakes).isLessThan(5);
            CountDownLatch ran = new CountDownLatch(1);
            timer.newTimeout(t -> ran.countDown(), 20, TimeUnit.MILLISECONDS);
            assertThat(ran.await(5, TimeUnit.SECONDS)).isTrue();
        } finally {
            timer.stop();
        }
    }

    @Test
    void stoppingHandsBackWhatIsPendingAndRunsNothingMore() throws Exception {
        DeadlineTimer timer = new DeadlineTimer("test-timer");
        AtomicInteger runs = new AtomicInteger();
        // due in an hour: a stall of the test before stop() does not let the timer run them (one of 100 ms could)
        Timeout pending = timer.newTimeout(t -> runs.incrementAndGet(), 1, TimeUnit.HOURS);
        Timeout cancelled = timer.newTimeout(t -> runs.incrementAndGet(), 1, TimeUnit.HOURS);
        cancelled.cancel();
        Set<Timeout> unprocessed = timer.stop();
        assertThat(unprocessed).containsExactly(pending);
        assertThatThrownBy(() -> timer.newTimeout(t -> runs.incrementAndGet(), 1, TimeUnit.MILLISECONDS))
                .isInstanceOf(IllegalStateException.class).hasMessage("cannot be started once stopped");
        Thread.sleep(200);
        assertThat(runs).hasValue(0);
    }
}
