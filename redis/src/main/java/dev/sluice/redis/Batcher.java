package dev.sluice.redis;

import io.lettuce.core.RedisCommandTimeoutException;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;

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
 * reading thread when that is parked ({@link ScriptConnection#execute}), which takes what waits when it runs.
 * The thread must wake for the answer anyway, so little is added; but the decisions that arrive before it runs
 * leave with the first instead of waiting a round trip behind it (a server starting the decisions of several
 * requests at once, say: with 16 started together, one call of 16 instead of one of 1 and one of 15). A
 * connection whose thread is busy refuses, and the caller sends.
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
 * deadline when its call leaves stays out of the call, and the batcher's {@link Watch} fails decisions in
 * flight one deadline after the other, so a late joiner keeps the rest of its time. The call counts as over (the next one may
 * leave) once it is answered or its last decision has failed. The decisions failed at one instant share one
 * exception, so that the circuit breaker counts them as the one failure of Redis they are.
 */
final class Batcher {
    /** Sends one call of the script: its keys and its arguments. */
    @FunctionalInterface
    interface Sender {
        CompletionStage<String> send(String[] keys, String[] arguments);
    }

    /** A decision waiting: its Redis key and the argument of its own, its deadline, and its answer. */
    private record Waiting(String key, String argument, long deadline, CompletableFuture<String> answer) {
    }

    /** Fires the batchers' {@link Watch}es; it only hands their work over to {@link #TIMED_OUT}. */
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1,
            daemon("sluice-redis-timer"));
    /**
     * Where a timed-out call's decisions fail, and so where their callers' continuations run (the store's calls
     * sent alone too): never on a timer's thread, which a continuation that blocks would hold up.
     */
    static final ExecutorService TIMED_OUT = Executors.newCachedThreadPool(daemon("sluice-redis-timeout"));
    /**
     * The batchers each thread is answering a call of, the innermost last (see {@link #handOver}). Kept by the
     * thread, not by the batcher: a bug a review found, a batcher's one field saved and put back around each
     * answer, marked for good a thread that had finished when two threads answered at once.
     */
    private static final ThreadLocal<ArrayList<Batcher>> ANSWERING = ThreadLocal.withInitial(() -> new ArrayList<>(2));

    /**
     * How long the threads of {@link #TIMER} and {@link #TIMED_OUT} live idle. They are shared by every store of the
     * class loader, which {@code close()} cannot stop, and a thread alive keeps its class loader: a review found the
     * timer's one thread, which lived for ever, keeping an undeployed web application's (the servlet filter's on
     * Redis). Idle a minute, with no watch set (a store closed has none), each ends, and the loader can go.
     */
    private static final long IDLE_SECONDS = 60;

    static {
        TIMER.setRemoveOnCancelPolicy(true); // a watch set earlier leaves its later timer at once
        // a thread with a watch still to fire waits for it whatever this says: the queue holds it
        TIMER.setKeepAliveTime(IDLE_SECONDS, java.util.concurrent.TimeUnit.SECONDS);
        TIMER.allowCoreThreadTimeOut(true);
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
    private final Function<String, String[]> split;
    private final int maxKeys;
    private final long timeoutNanos;
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    private boolean inFlight;
    /** Where a call that finds none in flight is handed: the connection's reading thread; null: nowhere. */
    private final Executor loop;
    private final Watch watch = new Watch();

    /**
     * @param fixed    the script's arguments that depend on the rule only (each decision adds one)
     * @param split    a call's answer split into its decisions', in the order of its keys (throws if it cannot)
     * @param maxKeys  the most decisions in one call
     * @param loop     where a call that finds none in flight is sent from, if it takes it (it may refuse with
     *                 {@link RejectedExecutionException}: the caller sends it); null: always the caller
     */
    Batcher(String[] fixed, Sender sender, Function<String, String[]> split, int maxKeys, long timeoutNanos,
            Executor loop) {
        this.fixed = fixed;
        this.loop = loop;
        this.sender = sender;
        this.split = split;
        this.maxKeys = maxKeys;
        this.timeoutNanos = timeoutNanos;
    }

    /**
     * Decides {@code key} in the next call: its answer, one decision as the script writes it.
     *
     * @param argument the script's one argument for this decision, after the rule's
     */
    CompletableFuture<String> submit(String key, String argument) {
        Waiting decision = new Waiting(key, argument, System.nanoTime() + timeoutNanos, new CompletableFuture<>());
        if (ANSWERING.get().contains(this)) { // see handOver
            Waiting[] alone = {decision};
            CompletableFuture<String> reply = call(alone);
            reply.whenComplete((answer, failure) -> answerGuarded(alone, reply));
            return decision.answer;
        }
        boolean handed = loop != null;
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
     * loop not run it in time (a loop blocked by a caller that waits on it, a loop shutting down), the
     * {@link Watch} sends at the deadline instead, where what waits fails as timed out: a decision handed over
     * waits no longer than one sent at once. Whichever comes first sends; the other does nothing.
     */
    private final class Handed extends AtomicBoolean implements Runnable {
        void handTo(Executor loop) {
            try {
                loop.execute(this);
            } catch (RejectedExecutionException e) {
                run();
                return;
            }
            watch.handed(this, System.nanoTime() + timeoutNanos);
        }

        @Override
        public void run() {
            if (!compareAndSet(false, true)) {
                return;
            }
            watch.sent(this);
            Waiting[] batch;
            synchronized (Batcher.this) {
                batch = take();
            }
            send(batch);
        }
    }

    /** How many times the watch's timer was set, for tests. */
    int timersSet() {
        synchronized (watch) {
            return watch.timersSet;
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
     * Answers {@code sent} and sends what waits. If decisions arrived while it was in flight, they leave first:
     * Redis works on their call while this thread wakes the callers answered (16 threads waiting for their
     * answers: 85,000–100,000 decisions a second against 82,000 answering first; bench/README.md, nineteenth
     * session). If none did, the callers are answered first, so that what they decide next, arriving while this
     * thread answers, joins one call (16 decisions started together and awaited together: 84,000–89,000 a
     * second against 64,000–68,000 sending first, which sent one of them alone and fifteen a round trip later).
     * Answering runs the callers' continuations on this thread, and one may decide again on this batcher and
     * wait; this thread is the one to send what waits, so such a decision goes alone, at once ({@link #submit}),
     * instead of waiting for itself for good (a review found it).
     */
    private void handOver(Waiting[] sent, CompletableFuture<String> reply) {
        Waiting[] waited;
        synchronized (this) {
            waited = waiting.isEmpty() ? null : take();
        }
        if (waited != null) {
            send(waited);
            answerGuarded(sent, reply);
            return;
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
        ArrayList<Batcher> answering = ANSWERING.get();
        answering.add(this);
        try {
            answer(sent, reply);
        } catch (RuntimeException | Error e) {
            fail(sent, e);
        } finally {
            answering.remove(answering.size() - 1);
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
        String[] arguments = Arrays.copyOf(fixed, fixed.length + batch.length);
        for (int i = 0; i < batch.length; i++) {
            keys[i] = batch[i].key;
            arguments[fixed.length + i] = batch[i].argument;
        }
        CompletableFuture<String> reply; // a copy: the timer fails it, not the connection's command
        try {
            reply = sender.send(keys, arguments).toCompletableFuture().copy();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        if (!reply.isDone()) {
            Call call = new Call(batch, reply);
            watch.add(call);
            reply.whenComplete((answer, failure) -> watch.remove(call));
        }
        return reply;
    }

    /**
     * A call in flight: its decisions, and the exception those that time out share, so the breaker counts the
     * call once (made by the watch when it first fails one of them; most calls never need it).
     */
    private static final class Call {
        final Waiting[] batch;
        final CompletableFuture<String> reply;
        RedisCommandTimeoutException timedOut;

        Call(Waiting[] batch, CompletableFuture<String> reply) {
            this.batch = batch;
            this.reply = reply;
        }

        long earliest() {
            long first = batch[0].deadline;
            for (Waiting decision : batch) {
                first = decision.deadline - first < 0 ? decision.deadline : first;
            }
            return first;
        }
    }

    /**
     * The deadlines of what this batcher has in flight, watched by one timer at a time.
     *
     * <p>Why not a timer a call: a timer scheduled on an empty {@link ScheduledThreadPoolExecutor} wakes its
     * thread, and nearly every call is answered within a millisecond, long before its deadline, so a timer a call
     * (two for a call handed to the loop) cost a wake of the timer thread a call or more, thousands a second,
     * for nothing (measured, sixth session: 8,000 wakes a second at 4,700 calls a second). Here the timer stays
     * armed for the earliest deadline it was set for while calls come and go; when it fires it fails what is past
     * its deadline, sends a handed call the loop did not run, and arms itself for the earliest deadline left,
     * if any. A busy batcher costs one wake a timeout (50 ms by default), an idle one none.
     *
     * <p>It sets itself again before it fails anything, and hands each failure to a thread of {@link #TIMED_OUT}
     * of its own: a caller's continuation that decides again and waits there holds up neither the watch nor
     * the other calls' deadlines.
     */
    private final class Watch {
        private final ArrayList<Call> calls = new ArrayList<>(4);
        private Handed handed;
        private long handedDeadline;
        private ScheduledFuture<?> timer;
        private long timerAt;
        private int timersSet;

        synchronized void add(Call call) {
            calls.add(call);
            cover(call.earliest());
        }

        synchronized void remove(Call call) {
            calls.remove(call);
        }

        /**
         * Watches a call handed to the loop, unless the loop has run it already. A bug a review found: a call the
         * loop ran before its caller got here was registered all the same, over the next call handed (whose
         * caller came first), and then cleared, so that one went unwatched: on a loop that never ran it, its
         * decisions waited for good. At most one call handed is not yet run (the next is handed only once the
         * call before it is over), so one place is enough.
         */
        synchronized void handed(Handed call, long deadline) {
            if (call.get()) {
                return; // run already: sent() took this lock after it was marked
            }
            handed = call;
            handedDeadline = deadline;
            cover(deadline);
        }

        synchronized void sent(Handed call) {
            if (handed == call) {
                handed = null;
            }
        }

        /** Sees that the timer fires by {@code deadline}: set already for no later, it is left alone. */
        private void cover(long deadline) {
            if (timer != null) {
                if (timerAt - deadline <= 0) {
                    return;
                }
                timer.cancel(false);
            }
            timerAt = deadline;
            int set = ++timersSet;
            timer = TIMER.schedule(() -> TIMED_OUT.execute(() -> fire(set)), deadline - System.nanoTime(),
                    TimeUnit.NANOSECONDS);
        }

        /** The timer set {@code set}-th fires (an earlier one, cancelled too late, may still fire: it does no harm). */
        private void fire(int set) {
            List<Runnable> due = new ArrayList<>();
            synchronized (this) {
                if (set == timersSet) {
                    timer = null; // else a later timer is set, and stays known
                }
                long now = System.nanoTime();
                long next = 0;
                boolean waiting = false;
                for (Iterator<Call> it = calls.iterator(); it.hasNext(); ) {
                    Call call = it.next();
                    if (call.reply.isDone()) {
                        it.remove();
                        continue;
                    }
                    Waiting[] expired = new Waiting[call.batch.length];
                    int count = 0;
                    boolean left = false;
                    for (Waiting decision : call.batch) {
                        if (decision.answer.isDone()) {
                            continue;
                        }
                        if (decision.deadline - now <= 0) {
                            expired[count++] = decision;
                        } else {
                            left = true;
                            if (!waiting || decision.deadline - next < 0) {
                                next = decision.deadline;
                                waiting = true;
                            }
                        }
                    }
                    if (count == 0) {
                        continue;
                    }
                    if (call.timedOut == null) {
                        call.timedOut = timedOut();
                    }
                    RedisCommandTimeoutException failure = call.timedOut;
                    if (!left) {
                        it.remove();
                        // every decision answered with it by the hand-over of the call
                        due.add(() -> call.reply.completeExceptionally(failure));
                    } else {
                        Waiting[] failed = Arrays.copyOf(expired, count);
                        due.add(() -> fail(failed, failure));
                    }
                }
                if (handed != null) {
                    if (handedDeadline - now <= 0) {
                        due.add(handed);
                        handed = null;
                    } else if (!waiting || handedDeadline - next < 0) {
                        next = handedDeadline;
                        waiting = true;
                    }
                }
                if (waiting) {
                    cover(next);
                }
            }
            for (Runnable task : due) {
                TIMED_OUT.execute(task);
            }
        }
    }

    private RedisCommandTimeoutException timedOut() {
        return new RedisCommandTimeoutException("Redis did not answer within "
                + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
    }

    /** Completes every decision of {@code batch} with its part of {@code done}'s answer, or with its failure. */
    private void answer(Waiting[] batch, CompletableFuture<String> done) {
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
            try {
                String[] answers = split.apply(reply);
                if (answers.length == batch.length) {
                    for (int i = 0; i < batch.length; i++) {
                        batch[i].answer.complete(answers[i]);
                    }
                    return;
                }
                failure = new IllegalStateException("gcra.lua answered " + answers.length + " decisions for "
                        + batch.length + " keys");
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        for (Waiting decision : batch) {
            decision.answer.completeExceptionally(failure);
        }
    }
}
