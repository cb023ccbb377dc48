package dev.sluice.redis;

import io.lettuce.core.RedisCommandTimeoutException;
import io.netty.util.concurrent.DefaultEventExecutor;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.SingleThreadEventExecutor;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The batcher's hand-over, with calls the test answers by hand (the Redis tests cannot choose which thread
 * answers a call, nor which connection that thread uses).
 */
class BatcherTest {
    private final List<CompletableFuture<String>> calls = new CopyOnWriteArrayList<>();
    /** The keys of each call, in the order of {@link #calls}. */
    private final List<List<String>> keysSent = new CopyOnWriteArrayList<>();
    private final Batcher batcher = timingOutAfter(TimeUnit.SECONDS.toMillis(30));

    /** The answers of the calls here are text, a decision's answer after another's, separated by commas. */
    private static String[] decisions(String reply) {
        return reply.split(",", -1);
    }

    private Batcher timingOutAfter(long timeoutMs) {
        return timingOutAfter(timeoutMs, null);
    }

    /** A batcher that hands a call finding none in flight to {@code loop} (null: sends it on the caller's thread). */
    private Batcher timingOutAfter(long timeoutMs, Executor loop) {
        return new Batcher(new String[10], (keys, arguments) -> {
            CompletableFuture<String> reply = new CompletableFuture<>();
            keysSent.add(List.of(keys));
            calls.add(reply);
            return reply;
        }, BatcherTest::decisions, 64, TimeUnit.MILLISECONDS.toNanos(timeoutMs), loop);
    }

    /**
     * A bug a review found: a caller's continuation, run by the thread answering a call, decided again on the
     * same batcher and waited; the decision waited for that call's hand-over, which that very thread was to
     * make, so it waited for good. Now it goes alone, at once.
     */
    @Test
    void aContinuationThatDecidesAgainAndWaitsOnTheAnsweringThreadIsSent() throws Exception {
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        CompletableFuture<String> nested = first.thenApply(answer -> batcher.submit("sluice:{b}", "1").join());
        assertThat(calls).hasSize(1);
        CompletableFuture.runAsync(() -> calls.get(0).complete("1 0 0 0 0 0"));
        awaitCalls(2, "the nested decision was sent");
        calls.get(1).complete("0 0 5 5 0 0");
        assertThat(nested.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
    }

    /**
     * A bug a review found: which thread was answering was one field a batcher, saved and put back around each
     * answer, so two threads answering at once (a call answered while another, sent alone, failed on a thread of
     * the timeouts) could put back a thread that had finished. That thread then passed for answering for good,
     * and every decision it made later went alone instead of in line. Here thread A answers the first call, whose
     * continuation sends a decision alone; thread B answers that one while A is still answering; A finishes
     * first, B last.
     */
    @Test
    void aThreadThatHasFinishedAnsweringDecidesInLine() throws Exception {
        ExecutorService a = Executors.newSingleThreadExecutor();
        ExecutorService b = Executors.newSingleThreadExecutor();
        try {
            CountDownLatch bAnswering = new CountDownLatch(1);
            CountDownLatch aDone = new CountDownLatch(1);
            CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
            CompletableFuture<CompletableFuture<String>> alone = first.thenApply(answer -> {
                CompletableFuture<String> sent = batcher.submit("sluice:{b}", "1"); // alone: A answers
                sent.thenRun(() -> { // on B, answering it
                    bAnswering.countDown();
                    awaitQuietly(aDone);
                });
                awaitQuietly(bAnswering);
                return sent;
            });
            a.execute(() -> calls.get(0).complete("1 9 0 1 0 0"));
            awaitCalls(2, "the decision of A's continuation was sent alone");
            b.execute(() -> calls.get(1).complete("1 8 0 2 0 0"));
            a.submit(() -> { }).get(10, TimeUnit.SECONDS); // A is done answering
            aDone.countDown();
            b.submit(() -> { }).get(10, TimeUnit.SECONDS); // and B is
            assertThat(alone.get().get()).isEqualTo("1 8 0 2 0 0");

            CompletableFuture<String> inFlight = batcher.submit("sluice:{c}", "1");
            CompletableFuture<String> fromA = a.submit(() -> batcher.submit("sluice:{d}", "1")).get(10, TimeUnit.SECONDS);
            assertThat(keysSent).as("A's decision waits for the call in flight").hasSize(3);
            calls.get(2).complete("1 7 0 3 0 0");
            assertThat(inFlight.get(10, TimeUnit.SECONDS)).isEqualTo("1 7 0 3 0 0");
            assertThat(keysSent.get(3)).containsExactly("sluice:{d}");
            calls.get(3).complete("1 6 0 4 0 0");
            assertThat(fromA.get(10, TimeUnit.SECONDS)).isEqualTo("1 6 0 4 0 0");
        } finally {
            a.shutdownNow();
            b.shutdownNow();
        }
    }

    /** What arrives while a call is in flight leaves together once it is answered, each with its own answer. */
    @Test
    void decisionsThatArriveWhileACallIsInFlightLeaveTogether() throws Exception {
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        CompletableFuture<String> second = batcher.submit("sluice:{b}", "2");
        CompletableFuture<String> third = batcher.submit("sluice:{c}", "3");
        assertThat(calls).hasSize(1);
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        assertThat(calls).as("the two that waited, in one call").hasSize(2);
        calls.get(1).complete("1 8 0 2 0 0,0 0 7 7 0 0");
        assertThat(second.get(10, TimeUnit.SECONDS)).isEqualTo("1 8 0 2 0 0");
        assertThat(third.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 7 7 0 0");
    }

    /**
     * A bug a review found: a call was failed whole at the earliest deadline among its decisions, so one that
     * joined late lost the rest of its time. Now each fails at its own deadline, and the answer, when it comes,
     * still answers those left.
     */
    @Test
    void aLateJoinerKeepsTheRestOfItsTime() throws Exception {
        Batcher batcher = timingOutAfter(2_000);
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        CompletableFuture<String> early = batcher.submit("sluice:{b}", "1");
        Thread.sleep(1_000);
        CompletableFuture<String> late = batcher.submit("sluice:{c}", "1");
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        assertThat(keysSent).containsExactly(List.of("sluice:{a}"), List.of("sluice:{b}", "sluice:{c}"));
        assertThatThrownBy(() -> early.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(RedisCommandTimeoutException.class);
        assertThat(late).as("about a second left to it").isNotDone();
        calls.get(1).complete("1 8 0 2 0 0,1 7 0 3 0 0");
        assertThat(late.get(10, TimeUnit.SECONDS)).isEqualTo("1 7 0 3 0 0");
    }

    /**
     * A decision whose deadline passed while it waited in line fails alone, and the others of its batch still
     * go (before, the whole call failed without leaving). Here the line is held up by a continuation that
     * blocks the thread answering the call ahead of it until the test lets it go.
     *
     * <p>A bug pinned in the test itself: it once let the line go by a fixed sleep that left the live decision
     * 200 ms of its time, and a slow CI machine spent them; then the live decision had its whole second, and a CI run
     * (twenty-second session) still spent it between the line let go and the answer: now it has three.
     */
    @Test
    void aDecisionPastItsDeadlineStaysOutOfItsCall() throws Exception {
        Batcher batcher = timingOutAfter(3_000);
        CountDownLatch lineHeld = new CountDownLatch(1);
        CountDownLatch answering = new CountDownLatch(1);
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        first.thenRun(() -> {
            answering.countDown();
            awaitQuietly(lineHeld);
        });
        CompletableFuture.runAsync(() -> calls.get(0).complete("1 9 0 1 0 0"));
        assertThat(answering.await(10, TimeUnit.SECONDS)).isTrue();
        // arrives while the call is being answered (nothing waited when its answer came: answered first)
        CompletableFuture<String> expired = batcher.submit("sluice:{b}", "1");
        // its caller then decides again, and waits: that must hold up neither the others nor itself
        CompletableFuture<String> again = expired.handle((answer, failure) -> batcher.submit("sluice:{e}", "1").join());
        Thread.sleep(3_100); // past the deadline of the decision in line
        CompletableFuture<String> live = batcher.submit("sluice:{c}", "1");
        lineHeld.countDown();
        assertThatThrownBy(() -> expired.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(RedisCommandTimeoutException.class);
        awaitCalls(2, "the live decision was sent");
        assertThat(keysSent.get(1)).containsExactly("sluice:{c}");
        calls.get(1).complete("0 0 5 5 0 0");
        assertThat(live.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
        awaitCalls(3, "the decision made again was sent");
        assertThat(keysSent.get(2)).containsExactly("sluice:{e}");
        calls.get(2).complete("1 9 0 1 0 0");
        assertThat(again.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
    }

    /**
     * Calls answered long before their deadlines share the one timer set for the first (it cost a wake of the
     * timer thread a call, two for a call handed to the loop: 8,000 wakes a second at 4,700 calls a second).
     */
    @Test
    void callsThatComeAndGoShareOneTimer() throws Exception {
        for (int i = 0; i < 100; i++) {
            CompletableFuture<String> decision = batcher.submit("sluice:{k" + i + "}", "1");
            calls.get(i).complete("1 9 0 1 0 0");
            assertThat(decision.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        }
        assertThat(batcher.timersSet()).isEqualTo(1);
    }

    /**
     * The timer set for an answered call's deadline, when it fires, sets itself for the deadline of the call in
     * flight then: that call fails at its own deadline, neither at the earlier one nor never.
     */
    @Test
    void theTimerOfAnAnsweredCallWatchesTheNextCall() throws Exception {
        Batcher batcher = timingOutAfter(1_000);
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        Thread.sleep(500); // the first call's deadline falls in the second's time
        long start = System.nanoTime();
        CompletableFuture<String> unanswered = batcher.submit("sluice:{b}", "1");
        assertThatThrownBy(() -> unanswered.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(RedisCommandTimeoutException.class);
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).as("not at the first call's deadline")
                .isBetween(1_000L, 5_000L);
        assertThat(batcher.timersSet()).isEqualTo(2);
    }

    /**
     * The watch under load: eight threads decide on one batcher whose calls are answered after up to 3 ms, or
     * never (one call in ten); every decision ends, with its call's answer or timed out, and none times out
     * before its deadline nor long after it, however the timer and the answers interleave.
     */
    /**
     * How late a timed-out decision may end on a loaded 2-core machine (the timer's thread waiting for a core, a
     * collection): well under a second, where a decision left for the next call's deadline, or for none, would not.
     */
    private static final long LATE_MS = 500;

    @Test
    void underLoadEveryDecisionEndsByItsDeadlineAndNoneBefore() throws Exception {
        ScheduledExecutorService answers = Executors.newScheduledThreadPool(2);
        Random random = new Random(11);
        long timeoutMs = 50;
        Batcher batcher = new Batcher(new String[10], (keys, arguments) -> {
            CompletableFuture<String> reply = new CompletableFuture<>();
            int roll;
            synchronized (random) {
                roll = random.nextInt(30);
            }
            if (roll >= 3) { // else never answered
                String answer = String.join(",", Collections.nCopies(keys.length, "1 9 0 1 0 0"));
                answers.schedule(() -> reply.complete(answer), roll / 10, TimeUnit.MILLISECONDS);
            }
            return reply;
        }, BatcherTest::decisions, 64, TimeUnit.MILLISECONDS.toNanos(timeoutMs), null);
        int threads = 8;
        int each = 500;
        List<String> wrong = new CopyOnWriteArrayList<>();
        AtomicInteger answered = new AtomicInteger();
        AtomicInteger timedOut = new AtomicInteger();
        List<Thread> deciders = new ArrayList<>();
        try {
            for (int t = 0; t < threads; t++) {
                int thread = t;
                Thread decider = new Thread(() -> {
                    for (int i = 0; i < each; i++) {
                        long start = System.nanoTime();
                        CompletableFuture<String> decision = batcher.submit("sluice:{" + thread + "-" + i + "}", "1");
                        try {
                            String answer = decision.get(10, TimeUnit.SECONDS);
                            if (!answer.equals("1 9 0 1 0 0")) {
                                wrong.add("answer " + answer);
                            }
                            answered.incrementAndGet();
                        } catch (ExecutionException e) {
                            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                            if (!(e.getCause() instanceof RedisCommandTimeoutException)) {
                                wrong.add("failure " + e.getCause());
                            } else if (tookMs < timeoutMs - 1) {
                                wrong.add("timed out after " + tookMs + " ms");
                            } else if (tookMs > timeoutMs + LATE_MS) {
                                wrong.add("timed out only after " + tookMs + " ms");
                            }
                            timedOut.incrementAndGet();
                        } catch (Exception e) {
                            wrong.add("no end within 10 s: " + e);
                            return;
                        }
                    }
                });
                deciders.add(decider);
                decider.start();
            }
            for (Thread decider : deciders) {
                decider.join(TimeUnit.MINUTES.toMillis(2));
                assertThat(decider.isAlive()).as("a decider is stuck").isFalse();
            }
        } finally {
            answers.shutdownNow();
        }
        assertThat(wrong).isEmpty();
        assertThat(answered.get() + timedOut.get()).isEqualTo(threads * each);
        assertThat(timedOut.get()).as("some calls went unanswered").isPositive();
        assertThat(answered.get()).isPositive();
    }

    /**
     * A review found: a call handed to the connection's loop had no timer until the loop ran it, so with the loop
     * held up (a caller blocking on it) the decision waited for good. Now it fails at its deadline all the same.
     */
    @Test
    void aCallHandedToALoopThatDoesNotRunItFailsAtItsDeadline() throws Exception {
        DefaultEventExecutor loop = new DefaultEventExecutor();
        Batcher batcher = timingOutAfter(300, loop);
        CountDownLatch busy = new CountDownLatch(1);
        try {
            busy = hold(loop);
            long start = System.nanoTime();
            CompletableFuture<String> held = batcher.submit("sluice:{b}", "1");
            assertThatThrownBy(() -> held.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(RedisCommandTimeoutException.class);
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isBetween(250L, 5_000L);
            assertThat(calls).as("never sent: its time was up when the timer took it").isEmpty();
            busy.countDown();
            CompletableFuture<String> after = batcher.submit("sluice:{c}", "1");
            awaitCalls(1, "the batcher goes on");
            calls.get(0).complete("1 9 0 1 0 0");
            assertThat(after.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        } finally {
            busy.countDown();
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    /**
     * A bug a review found: a call the loop ran (and whose answer came) before its caller registered it with the
     * watch was registered all the same, over the next call handed, and then cleared: that next call went
     * unwatched, and on a loop that never ran it, its decision waited for good. Here the loop runs the first
     * call on the spot, its answer comes at once, the next decision is handed meanwhile, and the loop never
     * runs it: it must fail at its deadline.
     */
    @Test
    void aCallHandedWhileTheOneBeforeIsStillRegisteringIsWatched() throws Exception {
        List<CompletableFuture<String>> next = new CopyOnWriteArrayList<>();
        TakenOverLoop loop = new TakenOverLoop();
        Batcher batcher = timingOutAfter(300, loop);
        try {
            AtomicInteger handedOver = new AtomicInteger();
            loop.takeOver = task -> switch (handedOver.incrementAndGet()) {
                case 1 -> {
                    task.run(); // the loop runs the first call before its caller goes on
                    calls.get(0).complete("1 9 0 1 0 0"); // answered at once: nothing in flight
                    next.add(batcher.submit("sluice:{b}", "1")); // handed to this loop...
                    yield true;
                }
                default -> true; // ...which never runs it
            };
            CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
            assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
            assertThat(next).hasSize(1);
            assertThatThrownBy(() -> next.get(0).get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(RedisCommandTimeoutException.class);
            assertThat(calls).as("its time was up when the watch sent it").hasSize(1);
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    /** An event loop as Netty's own, whose {@code execute} a test may take over (a task it takes is not queued). */
    private static final class TakenOverLoop extends SingleThreadEventExecutor {
        volatile Predicate<Runnable> takeOver = task -> false;

        TakenOverLoop() {
            super(null, new DefaultThreadFactory("taken-over-loop"), true);
        }

        @Override
        public void execute(Runnable task) {
            if (!takeOver.test(task)) {
                super.execute(task);
            }
        }

        @Override
        protected void run() { // as DefaultEventExecutor's
            while (true) {
                Runnable task = takeTask();
                if (task != null) {
                    runTask(task);
                    updateLastExecutionTime();
                }
                if (confirmShutdown()) {
                    break;
                }
            }
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * A call that finds none in flight is handed to the connection's loop, and what arrives before the loop runs
     * it leaves with it: three decisions started together go in one call (before, the first went alone and the
     * other two a round trip later).
     */
    @Test
    void decisionsStartedTogetherLeaveTogetherOnTheConnectionsLoop() throws Exception {
        DefaultEventExecutor loop = new DefaultEventExecutor();
        Batcher batcher = timingOutAfter(30_000, loop);
        try {
            CountDownLatch busy = hold(loop);
            CompletableFuture<String> b = batcher.submit("sluice:{b}", "1");
            CompletableFuture<String> c = batcher.submit("sluice:{c}", "1");
            CompletableFuture<String> d = batcher.submit("sluice:{d}", "1");
            assertThat(calls).as("handed to the loop, not sent on this thread").isEmpty();
            busy.countDown();
            awaitCalls(1, "the loop sent them");
            assertThat(keysSent.get(0)).containsExactly("sluice:{b}", "sluice:{c}", "sluice:{d}");
            calls.get(0).complete("1 9 0 1 0 0,1 9 0 1 0 0,0 0 5 5 0 0");
            assertThat(d.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
            assertThat(b.get(10, TimeUnit.SECONDS)).isEqualTo(c.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    /** A loop that refuses (busy): the caller sends the call itself, at once. */
    @Test
    void aLoopThatRefusesLeavesTheCallToItsCaller() throws Exception {
        Batcher batcher = timingOutAfter(30_000, task -> {
            throw new RejectedExecutionException("busy");
        });
        CompletableFuture<String> a = batcher.submit("sluice:{a}", "1");
        assertThat(calls).as("sent on this thread").hasSize(1);
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(a.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
    }

    /**
     * When an answer comes and decisions wait, their call leaves before the answered callers are answered: Redis
     * works on it while this thread wakes them (measured: bench/README.md, nineteenth session). When none wait,
     * the callers are answered first, so that what they decide next leaves together (above).
     */
    @Test
    void decisionsWaitingWhenAnAnswerComesLeaveBeforeItsCallersAreAnswered() throws Exception {
        CompletableFuture<String> a = batcher.submit("sluice:{a}", "1");
        CompletableFuture<String> b = batcher.submit("sluice:{b}", "1");
        AtomicInteger sentWhenAnswered = new AtomicInteger(-1);
        a.whenComplete((answer, failure) -> sentWhenAnswered.set(calls.size()));
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(sentWhenAnswered.get()).as("calls sent when a's caller was answered").isEqualTo(2);
        assertThat(keysSent.get(1)).containsExactly("sluice:{b}");
        calls.get(1).complete("0 0 5 5 0 0");
        assertThat(b.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
    }

    /**
     * A review found: calls that fail before they leave (a connection refusing commands while Redis is down)
     * were handed over one level deeper each, so a long line overflowed the stack, the error was swallowed by
     * the future, and the batcher stayed in flight for good. Now they are answered in a loop.
     */
    @Test
    void aLongLineOfCallsFailingAtOnceIsAnsweredAndTheBatcherGoesOn() throws Exception {
        AtomicBoolean refusing = new AtomicBoolean();
        List<CompletableFuture<String>> held = new CopyOnWriteArrayList<>();
        Batcher batcher = new Batcher(new String[10], (keys, arguments) -> {
            if (refusing.get()) {
                return CompletableFuture.failedFuture(new IllegalStateException("refused: Redis is down"));
            }
            CompletableFuture<String> reply = new CompletableFuture<>();
            held.add(reply);
            return reply;
        }, BatcherTest::decisions, 64, TimeUnit.SECONDS.toNanos(60), null);
        CompletableFuture<String> first = batcher.submit("sluice:{first}", "1");
        int line = 200_000;
        List<CompletableFuture<String>> waiting = new ArrayList<>(line);
        for (int i = 0; i < line; i++) {
            waiting.add(batcher.submit("sluice:{k" + i + "}", "1"));
        }
        refusing.set(true);
        held.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        for (CompletableFuture<String> decision : waiting) {
            assertThatThrownBy(() -> decision.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasMessageContaining("refused");
        }
        refusing.set(false);
        CompletableFuture<String> after = batcher.submit("sluice:{after}", "1");
        assertThat(held).as("the batcher sends again").hasSize(2);
        held.get(1).complete("0 0 5 5 0 0");
        assertThat(after.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
    }

    /** A nil answer for a batch fails its decisions (it threw out of the hand-over, and the batcher stayed in flight). */
    @Test
    void aNilAnswerForABatchFailsItsDecisions() throws Exception {
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "1");
        CompletableFuture<String> b = batcher.submit("sluice:{b}", "1");
        CompletableFuture<String> c = batcher.submit("sluice:{c}", "1");
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        calls.get(1).complete(null);
        assertThatThrownBy(() -> b.get(10, TimeUnit.SECONDS)).hasMessageContaining("nil");
        assertThatThrownBy(() -> c.get(10, TimeUnit.SECONDS)).hasMessageContaining("nil");
        CompletableFuture<String> after = batcher.submit("sluice:{d}", "1");
        assertThat(calls).as("the batcher sends again").hasSize(3);
        calls.get(2).complete("1 8 0 2 0 0");
        assertThat(after.get(10, TimeUnit.SECONDS)).isEqualTo("1 8 0 2 0 0");
    }

    /** Waits (10 s at most) until {@code n} calls have been sent. */
    private void awaitCalls(int n, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (calls.size() < n) {
            assertThat(System.nanoTime()).as(what).isLessThan(deadline);
            Thread.sleep(10);
        }
    }

    /** Keeps {@code loop} busy until the latch returned is counted down. */
    private static CountDownLatch hold(DefaultEventExecutor loop) {
        CountDownLatch busy = new CountDownLatch(1);
        loop.execute(() -> {
            try {
                busy.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return busy;
    }
}
