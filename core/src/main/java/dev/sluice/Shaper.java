package dev.sluice;

import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Runs submitted tasks at a constant rate, in the order they came, from a bounded queue: the leaky bucket of
 * the seeds as a FIFO queue that releases at a fixed rate. A burst of submissions is smoothed out instead of
 * rejected, up to the queue's capacity; beyond it, work is refused at once.
 *
 * <pre>{@code
 * try (Shaper shaper = Shaper.builder().rate("10/1s").queue(100).build()) {
 *     CompletableFuture<Void> sent = shaper.submit(() -> mail.send(message));  // at most 10 a second
 * }
 * }</pre>
 *
 * <p>Each submission is one decision of a leaky-bucket limiter in shaping mode (capacity = the queue): the
 * decision's {@code delay} is how long the queue ahead of the task takes to drain, so the task's release
 * time is fixed the moment it is accepted. A dispatcher thread hands each task to the executor at its release
 * time ({@link DelayQueue}: earliest first, FIFO among equals). By default the dispatcher runs tasks itself,
 * one after another. Handovers are never closer than one task's share of the period ({@code P/L}), so a task
 * that overruns its turn delays those after it instead of letting them start together (a bug pinned in
 * ShaperTest: at 10/1s, a task of 600 ms was followed by six starts at once); tasks that keep overrunning their
 * turns on the default executor fall behind the queue's schedule, and then the tasks waiting to be handed over
 * bound the queue too: a submission finding more than {@code capacity} of them waiting is refused (a review found the queue
 * growing without end behind tasks slower than their turns), so slow tasks belong on an executor of their own. An
 * executor that refuses a task (shut down, saturated) fails that task's future with its exception; the shaper
 * goes on. A task whose future was cancelled before its turn is not run (its turn is spent).
 *
 * <p>The dispatcher is a thread of the shaper's own, until {@link #close}: a shaper is closed as the application
 * that made it stops (in a servlet container, as it is undeployed), else its thread and the classes it holds stay.
 * It keeps the context class loader of the thread that built it, since by default tasks run on it.
 */
public final class Shaper implements AutoCloseable {
    private static final String QUEUE = "queue";

    private final Rule rule;
    private final InMemoryStore store = new InMemoryStore();
    private final Executor executor;
    /** One task's share of the period, {@code P/L}, as a whole part and a remainder of {@code L}ths. */
    private final long shareNanos;
    private final long shareRemainder;
    private final long rate;
    /** The queue's capacity: the bucket's, and the most tasks that may wait to be handed over. */
    private final long capacity;
    /** Guards {@link #closed} against a task added as the dispatcher decides to stop. */
    private final Object closing = new Object();
    private final Object deciding = new Object();
    private final DelayQueue<Release> releases = new DelayQueue<>();
    private final AtomicLong sequence = new AtomicLong();
    private final Thread dispatcher;
    private volatile boolean closed;

    private Shaper(Limit limit, Executor executor) {
        this.rule = Rule.of(Algorithm.LEAKY_BUCKET, List.of(limit), Mode.SHAPING, Rule.NO_MAX_DELAY);
        this.executor = executor;
        this.rate = limit.amount();
        this.capacity = limit.burst();
        this.shareNanos = limit.periodNanos() / rate;
        this.shareRemainder = limit.periodNanos() % rate;
        this.dispatcher = new Thread(this::dispatch, "sluice-shaper");
        this.dispatcher.setDaemon(true);
        this.dispatcher.start();
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Queues {@code task} to run at its turn.
     *
     * @return completed when the task has run (exceptionally if it threw)
     * @throws RejectedExecutionException when the queue is full (saying when there will be room, or that the tasks
     *                                    wait behind slow ones) or the shaper is closed; nothing was queued
     */
    public CompletableFuture<Void> submit(Runnable task) {
        if (task == null) {
            throw new IllegalArgumentException("task must not be null");
        }
        if (closed) {
            throw new RejectedExecutionException("the shaper is closed");
        }
        // before deciding, so that a refused task takes no turn; one more than the capacity, since the task due now
        // waits there until the dispatcher takes it (a review found a submission refused so, just as room opened)
        if (releases.size() > capacity) {
            throw new RejectedExecutionException("the queue is full (" + capacity + " tasks): they wait behind tasks"
                    + " slower than their turns");
        }
        long now;
        Decision decision;
        // the time read and the decision together: a submitter paused between them was decided at the later time
        // another had since left on the queue's key, but released from its own earlier one, ahead of that other
        // (the time review); the rate held, the order did not
        synchronized (deciding) {
            now = SystemClock.INSTANCE.nanos();
            decision = store.decide(rule, QUEUE, 1, now);
        }
        if (!decision.allowed()) {
            throw new RejectedExecutionException("the queue is full (" + rule.limits().get(0).burst()
                    + " tasks); room again in " + DurationFormat.toMillisCeil(decision.retryAfterNanos()) + "ms");
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        synchronized (closing) { // so that the dispatcher never stops with this task still to hand over
            if (closed) {
                throw new RejectedExecutionException("the shaper is closed");
            }
            releases.add(new Release(task, done, SystemClock.INSTANCE.toNanoTime(now + decision.delayNanos()),
                    sequence.getAndIncrement()));
        }
        return done;
    }

    /** Tasks accepted and not yet handed to the executor. */
    public int queued() {
        return releases.size();
    }

    /**
     * Hands each task over at its turn: its release time, but never sooner than one share of the period
     * ({@code P/L}, kept exact as a whole part and a remainder of {@code L}ths) after the turn before. A turn is
     * when the task was handed over if that was late (the dispatcher was busy running the task before, or woke
     * late), else the time it was due: so after an overrun the next tasks follow one share apart instead of
     * together, and a sleep's overshoot is never added to the next turn (each late wake moves the schedule by at
     * most its own lateness, not by the sum of them all). Nobody else interrupts this thread: an interrupt is a
     * task's, left set as it ended on this thread (the default executor), and is cleared.
     */
    private void dispatch() {
        boolean any = false;
        long turn = 0; // the last turn, on System.nanoTime()
        long turnRemainder = 0; // and the L-ths of a nanosecond past it
        while (true) {
            Release release;
            try {
                release = releases.poll(50, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                continue; // a task's interrupt, cleared by the throw
            }
            if (release == null) {
                synchronized (closing) {
                    if (closed && releases.isEmpty()) {
                        return;
                    }
                }
                continue;
            }
            long next = turn + shareNanos + (turnRemainder + shareRemainder) / rate;
            long nextRemainder = (turnRemainder + shareRemainder) % rate;
            long earliest = next + (nextRemainder > 0 ? 1 : 0);
            boolean spaced = any && earliest - release.at > 0; // its release comes too soon after the turn before
            long due = spaced ? earliest : release.at;
            long now = System.nanoTime();
            if (due - now > 0) {
                awaitTurn(due);
                turn = spaced ? next : release.at;
                turnRemainder = spaced ? nextRemainder : 0;
            } else {
                turn = now; // handed over late: this is its turn
                turnRemainder = 0;
            }
            any = true;
            try {
                executor.execute(release::run);
            } catch (Throwable e) { // refused (RejectedExecutionException), no thread for it, the executor's fault
                release.done.completeExceptionally(e);
            }
            Thread.interrupted(); // a task's interrupt, if it ran on this thread
        }
    }

    /** Sleeps until {@code at} on {@link System#nanoTime()}; an interrupt (a task's) does not cut it short. */
    private static void awaitTurn(long at) {
        for (long left = at - System.nanoTime(); left > 0; left = at - System.nanoTime()) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                // a task's interrupt: cleared by the throw
            }
        }
    }

    /**
     * Stops accepting work, lets every accepted task run at its turn, and waits for the dispatcher. If the
     * waiting thread is interrupted it stops waiting (the interrupt stays set); the accepted tasks still run.
     * Called by a task on the dispatcher's own thread (the default executor) it does not wait, which would be for
     * ever (a review found it): the tasks after it run once it returns.
     */
    @Override
    public void close() {
        synchronized (closing) {
            closed = true;
        }
        if (Thread.currentThread() == dispatcher) {
            return;
        }
        try {
            dispatcher.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A task and the {@link System#nanoTime()} at which it may run. */
    private static final class Release implements Delayed {
        private final Runnable task;
        private final CompletableFuture<Void> done;
        private final long at;
        private final long order;

        Release(Runnable task, CompletableFuture<Void> done, long at, long order) {
            this.task = task;
            this.done = done;
            this.at = at;
            this.order = order;
        }

        void run() {
            if (done.isCancelled()) {
                return; // as an executor's cancelled task: never run
            }
            try {
                task.run();
                done.complete(null);
            } catch (RuntimeException | Error e) {
                done.completeExceptionally(e);
            }
        }

        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(at - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed other) {
            Release that = (Release) other;
            int byTime = Long.compare(at - that.at, 0);
            return byTime != 0 ? byTime : Long.compare(order, that.order);
        }
    }

    /** The rate and the queue of a {@link Shaper}. */
    public static final class Builder {
        private Limit rate;
        private long queue; // 0: not given
        private Executor executor = Runnable::run;

        private Builder() {
        }

        /** How many tasks per period are released, such as {@code 10/1s}. */
        public Builder rate(String rate) {
            this.rate = Limit.parse(rate);
            return this;
        }

        /**
         * How many accepted tasks the queue holds at most, counting the one whose turn is now (default: one period's
         * worth, {@code L}): at {@code queue(5)}, five submitted at once are accepted, one handed over at once and four
         * waiting, and a sixth is refused. nginx's {@code limit_req burst=N} counts only those waiting: it is
         * {@code queue(N + 1)}.
         */
        public Builder queue(long capacity) {
            if (capacity < 1 || capacity > Limit.MAX_AMOUNT) {
                throw new IllegalArgumentException("queue must be between 1 and " + Limit.MAX_AMOUNT
                        + " (the tasks that may wait), got " + capacity);
            }
            this.queue = capacity;
            return this;
        }

        /** Where released tasks run (default: on the dispatcher thread, one after another). */
        public Builder executor(Executor executor) {
            if (executor == null) {
                throw new IllegalArgumentException("executor must not be null");
            }
            this.executor = executor;
            return this;
        }

        public Shaper build() {
            if (rate == null) {
                throw new IllegalArgumentException("a rate is required, such as 10/1s");
            }
            return new Shaper(queue != 0 ? rate.withBurst(queue) : rate, executor);
        }
    }
}
