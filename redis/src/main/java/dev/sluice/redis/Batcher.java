package dev.sluice.redis;

import io.lettuce.core.RedisCommandTimeoutException;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The decisions of one rule waiting on one connection, sent to Redis together as one call of {@code gcra.lua}.
 *
 * <h2>Why</h2>
 * A call of a script costs Redis more than the decision inside it: the call itself, parsing its arguments
 * (the rule's ten constants), reading {@code TIME}; and it costs the client encoding a command, a timer for its
 * timeout, and a turn of the event loop. With many callers on one connection those are paid once for all the
 * decisions waiting, not once each.
 *
 * <h2>How (no added wait)</h2>
 * At most one call is in flight per batcher. A decision that finds none in flight is sent at once, alone: a
 * lone caller waits one round trip, as without batching. Decisions that arrive while a call is in flight wait
 * for its answer, and then leave together, up to {@code maxKeys} in one call. So a batch is as large as the
 * number of decisions that arrived during one round trip, and never waits for a batch to fill.
 *
 * <p>A call that finds none in flight is not written on the caller's thread but handed to the connection's
 * event loop (known once it has answered a call: the thread answering is that loop), which takes what waits
 * when it runs. Writing on another thread hands the write to that loop anyway, so nothing is added; but the
 * decisions that arrive before the loop runs it leave with the first instead of waiting a round trip behind it
 * (a server starting the decisions of several requests at once, say: with 16 started together, one call of 16
 * instead of one of 1 and one of 15).
 *
 * <h2>Order and atomicity</h2>
 * The script decides the keys of a call one after the other, in the order they arrived, each exactly as a
 * call of its own would (a key twice in one call sees its first decision); Redis runs the script whole, so
 * every decision is as atomic as alone. Every decision of a call is made at the same instant of the server's
 * clock ({@code TIME} read once), unless a time is passed in.
 *
 * <h2>Timeouts</h2>
 * Each decision has its own deadline, its arrival plus the store's timeout: one that waited behind a call
 * in flight gets only what is left of it, so no decision waits for Redis longer than the timeout, whether
 * it waited in line or on the wire. A decision whose deadline passes fails with
 * {@link RedisCommandTimeoutException}, as a command of its own would, and only it: one already past its
 * deadline when its call leaves stays out of the call, and a call's timer fails its decisions one deadline
 * after the other, so a late joiner keeps the rest of its time. The call counts as over (the next one may
 * leave) once it is answered or its last decision has failed. The decisions failed at one instant share one
 * exception, so that the circuit breaker counts them as the one failure of Redis they are.
 */
final class Batcher {
    /** Sends one call of the script: its keys and its arguments. */
    @FunctionalInterface
    interface Sender {
        CompletionStage<String> send(String[] keys, String[] arguments);
    }

    /** A decision waiting: its Redis key and the three arguments of its own, its deadline, and its answer. */
    private record Waiting(String key, String nowMs, String nowNs, String cost, long deadline,
                           CompletableFuture<String> answer) {
    }

    /** Times calls out; it only hands the failing over to {@link #TIMED_OUT}. */
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1,
            daemon("sluice-redis-timer"));
    /** Where a timed-out call's decisions fail, and so where their callers' continuations run. */
    private static final ExecutorService TIMED_OUT = Executors.newCachedThreadPool(daemon("sluice-redis-timeout"));

    static {
        TIMER.setRemoveOnCancelPolicy(true); // most calls are answered: their timers leave the queue at once
    }

    private static ThreadFactory daemon(String name) {
        return runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        };
    }

    private final String[] fixed;
    private final Sender sender;
    private final int maxKeys;
    private final long timeoutNanos;
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    private boolean inFlight;
    /** The thread answering a call, while it does (see {@link #handOver}). */
    private volatile Thread answering;
    /** The event loop of the connection, learnt from the thread answering its calls; null until one is. */
    private volatile EventExecutor loop;

    /**
     * @param fixed    the script's arguments that depend on the rule only (each decision adds three)
     * @param maxKeys  the most decisions in one call
     */
    Batcher(String[] fixed, Sender sender, int maxKeys, long timeoutNanos) {
        this.fixed = fixed;
        this.sender = sender;
        this.maxKeys = maxKeys;
        this.timeoutNanos = timeoutNanos;
    }

    /** Decides {@code key} in the next call: its answer, one decision as the script writes it. */
    CompletableFuture<String> submit(String key, String nowMs, String nowNs, String cost) {
        Waiting decision = new Waiting(key, nowMs, nowNs, cost, System.nanoTime() + timeoutNanos,
                new CompletableFuture<>());
        if (answering == Thread.currentThread()) { // see handOver
            Waiting[] alone = {decision};
            CompletableFuture<String> reply = call(alone);
            reply.whenComplete((answer, failure) -> answerGuarded(alone, reply));
            return decision.answer;
        }
        EventExecutor loop = this.loop;
        boolean handed = loop != null && !loop.inEventLoop();
        Waiting[] batch = null;
        synchronized (this) {
            waiting.add(decision);
            if (inFlight) {
                return decision.answer;
            }
            inFlight = true;
            if (!handed) {
                batch = take();
            }
        }
        if (handed) {
            new Handed().handTo(loop);
        } else {
            send(batch);
        }
        return decision.answer;
    }

    /**
     * A call handed to the connection's event loop: the loop sends what waits when it runs this. Should the
     * loop not run it in time (a loop blocked by a caller that waits on it, a loop shutting down), a timer sends
     * at the deadline instead, where what waits fails as timed out: a decision handed over waits no longer than
     * one sent at once. Whichever comes first sends; the other does nothing.
     */
    private final class Handed extends AtomicBoolean implements Runnable {
        private volatile ScheduledFuture<?> timer;

        void handTo(EventExecutor loop) {
            try {
                loop.execute(this);
            } catch (RejectedExecutionException e) {
                run();
                return;
            }
            timer = TIMER.schedule(() -> TIMED_OUT.execute(this), timeoutNanos, TimeUnit.NANOSECONDS);
            if (get()) {
                timer.cancel(false); // sent already, before the timer was set
            }
        }

        @Override
        public void run() {
            if (!compareAndSet(false, true)) {
                return;
            }
            ScheduledFuture<?> armed = timer;
            if (armed != null) {
                armed.cancel(false);
            }
            Waiting[] batch;
            synchronized (Batcher.this) {
                batch = take();
            }
            send(batch);
        }
    }

    /** The next decisions to send, oldest first; the caller holds the lock. */
    private Waiting[] take() {
        Waiting[] batch = new Waiting[Math.min(waiting.size(), maxKeys)];
        for (int i = 0; i < batch.length; i++) {
            batch[i] = waiting.poll();
        }
        return batch;
    }

    /**
     * Sends {@code batch}, less what is past its deadline already (failed here); once it is answered,
     * {@link #handOver}. When nothing of it is left, the next batch goes instead. A bug pinned: a call failed
     * before it left (a connection refusing commands while Redis is down) threw out of here, and the batcher
     * stayed "in flight" for good, so every later decision on it waited forever.
     */
    private void send(Waiting[] batch) {
        while (batch != null) {
            Waiting[] live = unexpired(batch);
            if (live.length > 0) {
                CompletableFuture<String> reply = call(live);
                if (!reply.isDone()) {
                    reply.whenComplete((answer, failure) -> handOver(live, reply));
                    return;
                }
                // failed before it left (a connection refusing commands while Redis is down): answered here, and
                // the next batch sent by this loop, not by a hand-over nested one level deeper per batch (a
                // review found that a long line could overflow the stack, and the batcher stay in flight)
                answerGuarded(live, reply);
            }
            batch = next();
        }
    }

    /**
     * The decisions of {@code batch} still within their deadline; the others are failed, on a thread of
     * {@link #TIMED_OUT}: failed here, a caller's continuation that decided again and waited would wait for the
     * send this very thread is to make.
     */
    private Waiting[] unexpired(Waiting[] batch) {
        long now = System.nanoTime();
        int live = 0;
        for (Waiting decision : batch) {
            if (decision.deadline - now > 0) {
                live++;
            }
        }
        if (live == batch.length) {
            return batch; // the common case: nothing made
        }
        Waiting[] kept = new Waiting[live];
        Waiting[] expired = new Waiting[batch.length - live];
        int k = 0;
        int e = 0;
        for (Waiting decision : batch) {
            if (decision.deadline - now > 0) {
                kept[k++] = decision;
            } else {
                expired[e++] = decision;
            }
        }
        TIMED_OUT.execute(() -> fail(expired, timedOut()));
        return kept;
    }

    private static void fail(Waiting[] decisions, Throwable failure) {
        for (Waiting decision : decisions) {
            decision.answer.completeExceptionally(failure);
        }
    }

    /**
     * Answers {@code sent}, then sends what arrived meanwhile. Answering first lets the callers it wakes join the
     * next call (sending first measured no faster than one call a decision). Answering runs the callers'
     * continuations on this thread, and one may decide again on this batcher and wait; this thread is the one to
     * send what waits, so such a decision goes alone, at once ({@link #submit}), instead of waiting for itself
     * for good (a review found it).
     */
    private void handOver(Waiting[] sent, CompletableFuture<String> reply) {
        EventExecutor current = ThreadExecutorMap.currentExecutor(); // null on a thread of TIMED_OUT, say
        if (current != null && current != loop) {
            loop = current;
        }
        answerGuarded(sent, reply);
        Waiting[] next = next();
        if (next != null) {
            send(next);
        }
    }

    /**
     * Answers {@code sent} with this thread marked as answering (see {@link #handOver}), a call sent alone too
     * (its continuations may decide again and wait as well). Whatever answering throws, {@code sent} is
     * answered and the caller goes on to the next batch: a batcher must never stay in flight.
     */
    private void answerGuarded(Waiting[] sent, CompletableFuture<String> reply) {
        Thread previous = answering;
        answering = Thread.currentThread();
        try {
            answer(sent, reply);
        } catch (RuntimeException | Error e) {
            fail(sent, e);
        } finally {
            answering = previous;
        }
    }

    /** What arrived while a call was in flight, or null (and nothing in flight) when nothing did. */
    private Waiting[] next() {
        synchronized (this) {
            if (waiting.isEmpty()) {
                inFlight = false;
                return null;
            }
            return take();
        }
    }

    /**
     * One call of the script for {@code batch}: its decisions fail one by one as their deadlines pass, and the
     * call itself, so that the next may leave, when the last of them has.
     */
    private CompletableFuture<String> call(Waiting[] batch) {
        String[] keys = new String[batch.length];
        String[] arguments = Arrays.copyOf(fixed, fixed.length + 3 * batch.length);
        for (int i = 0; i < batch.length; i++) {
            Waiting decision = batch[i];
            keys[i] = decision.key;
            arguments[fixed.length + 3 * i] = decision.nowMs;
            arguments[fixed.length + 3 * i + 1] = decision.nowNs;
            arguments[fixed.length + 3 * i + 2] = decision.cost;
        }
        CompletableFuture<String> reply; // a copy: the timer fails it, not the connection's command
        try {
            reply = sender.send(keys, arguments).toCompletableFuture().copy();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        if (!reply.isDone()) {
            new Deadlines(batch, reply).arm();
        }
        return reply;
    }

    /**
     * The timer of a call in flight: armed for the earliest deadline among its decisions not yet answered, it
     * fails those whose deadline has passed and arms itself again for the next, until the call is answered.
     * Most calls are answered before their first deadline: one timer each, cancelled.
     */
    private final class Deadlines implements Runnable {
        private final Waiting[] batch;
        private final CompletableFuture<String> reply;
        private volatile ScheduledFuture<?> timer;
        /**
         * One exception for every decision of the call that times out, so the breaker counts the call once; made
         * at the first firing (most calls never fire), before the timer is set again.
         */
        private RedisCommandTimeoutException timedOut;

        Deadlines(Waiting[] batch, CompletableFuture<String> reply) {
            this.batch = batch;
            this.reply = reply;
        }

        void arm() {
            long first = batch[0].deadline;
            for (Waiting decision : batch) {
                first = decision.deadline - first < 0 ? decision.deadline : first;
            }
            arm(first);
            reply.whenComplete((answer, failure) -> timer.cancel(false));
        }

        private void arm(long deadline) {
            // failed on a thread of TIMED_OUT, never on the timer's: a caller's continuation that blocks there
            // would hold up every timeout after it (the connection's own timeout stays the outer bound)
            timer = TIMER.schedule(() -> TIMED_OUT.execute(this), deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        /**
         * Fails what is past its deadline. The timer is set again (or the call failed whole, which hands over under
         * the guard of {@link #handOver}) before any decision fails here: a continuation that then decides again
         * and waits holds up this thread, never the deadlines of the others.
         */
        @Override
        public void run() {
            if (reply.isDone()) {
                return;
            }
            if (timedOut == null) {
                timedOut = timedOut();
            }
            long now = System.nanoTime();
            long next = 0;
            boolean waiting = false;
            Waiting[] expired = new Waiting[batch.length];
            int count = 0;
            for (Waiting decision : batch) {
                if (decision.answer.isDone()) {
                    continue;
                }
                if (decision.deadline - now <= 0) {
                    expired[count++] = decision;
                } else if (!waiting || decision.deadline - next < 0) {
                    next = decision.deadline;
                    waiting = true;
                }
            }
            if (!waiting) {
                reply.completeExceptionally(timedOut); // every decision answered with it by handOver
                return;
            }
            arm(next);
            fail(Arrays.copyOf(expired, count), timedOut);
        }
    }

    private RedisCommandTimeoutException timedOut() {
        return new RedisCommandTimeoutException("Redis did not answer within "
                + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
    }

    /** Completes every decision of {@code batch} with its part of {@code done}'s answer, or with its failure. */
    private static void answer(Waiting[] batch, CompletableFuture<String> done) {
        String reply = null;
        Throwable failure = null;
        try {
            reply = done.join();
        } catch (RuntimeException e) { // CompletionException, CancellationException
            failure = e.getCause() != null ? e.getCause() : e;
        }
        if (failure == null && reply == null) {
            failure = new IllegalStateException("gcra.lua answered nil for " + batch.length + " keys");
        }
        if (failure == null && batch.length == 1) {
            batch[0].answer.complete(reply);
            return;
        }
        if (failure == null) {
            String[] answers = reply.split(",", -1);
            if (answers.length == batch.length) {
                for (int i = 0; i < batch.length; i++) {
                    batch[i].answer.complete(answers[i]);
                }
                return;
            }
            failure = new IllegalStateException("gcra.lua answered " + answers.length + " decisions for "
                    + batch.length + " keys: \"" + reply + "\"");
        }
        for (Waiting decision : batch) {
            decision.answer.completeExceptionally(failure);
        }
    }
}
