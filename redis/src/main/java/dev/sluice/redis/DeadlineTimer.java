package dev.sluice.redis;

import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The timer that ends the commands Redis does not answer in time (the calls the store sends alone on its own
 * connections, and Lettuce's {@code TimeoutOptions} in a Cluster), and watches the writes of the store's own
 * connections (about one watch a timeout while a connection writes, never cancelled, firing to look): its one
 * thread sleeps until the earliest deadline it knows of, and for good while nothing is pending.
 *
 * <h2>Why not a wheel</h2>
 * Lettuce's own timer is Netty's {@code HashedWheelTimer} ticking every 100 ms, so a command given 50 ms ended
 * after 50 to 150 ms (pinned in RedisFailureTest). A wheel ticking every twentieth of the timeout ends it on time,
 * but its thread wakes at every tick for as long as the store lives: 400 times a second at the default 50 ms, on
 * a store that decides nothing. This timer wakes when a deadline is due, and not at all when the store is idle.
 *
 * <h2>How</h2>
 * A new timeout goes on a lock-free queue. When the thread wakes it takes in what was queued, drops the cancelled
 * (nearly every one: Redis answers in well under a millisecond, and Lettuce cancels the timeout as the answer comes),
 * runs those due, and sleeps until the earliest deadline among those left and those it has just taken in, cancelled
 * or not. A timeout added while the thread sleeps wakes it only when it is due before the thread would wake.
 *
 * <p>Why the cancelled ones count: commands share one timeout, so the first command sent after a wake is due before
 * any sent later. The thread, woken by it or sleeping for good, sleeps until its deadline whether or not it is
 * answered by then, and the commands sent meanwhile, all due later, wake nobody: a busy store wakes the thread a few
 * times a timeout (at a wake the first command sent after the last one is due a moment later, and wakes it again),
 * some 40 to 60 times a second at the default 50 ms, and a store gone idle once or twice more. Were only the
 * pending ones counted, a command answered before the thread looked at it would leave the thread asleep for good
 * (or for a longer timeout, such as Lettuce's reconnect delays), and the next command would wake it again: a wake a
 * command. Every {@link #PURGE_EVERY}-th timeout added also wakes it, so that the cancelled ones of a long timeout do
 * not pile up between two wakes.
 *
 * <p>A timeout fires on this timer's thread, as on Netty's; a task that throws does not stop the timer.
 */
final class DeadlineTimer implements Timer {
    /** Every so many timeouts added, the thread wakes to let go of the cancelled ones. */
    static final int PURGE_EVERY = 4096;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(Entry.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final System.Logger LOG = System.getLogger(DeadlineTimer.class.getName());

    private final ConcurrentLinkedQueue<Entry> added = new ConcurrentLinkedQueue<>();
    private final AtomicInteger addedCount = new AtomicInteger();
    private final Thread thread;
    /** The timeouts the thread has taken in and not yet run or dropped; the thread's alone until it ends. */
    private final ArrayList<Entry> pending = new ArrayList<>();
    private volatile boolean stopped;
    /** When the thread is to wake (System.nanoTime), while it sleeps for a deadline. */
    private volatile long wakeAt;
    /** Whether the thread sleeps with nothing pending, until a timeout is added. */
    private volatile boolean sleepingForGood;
    private volatile int wakes;
    /** The earliest deadline the thread has seen this round, if {@link #any}; the thread's alone. */
    private long earliest;
    private boolean any;

    DeadlineTimer(String threadName) {
        thread = new Thread(this::run, threadName);
        thread.setDaemon(true);
        thread.start();
    }

    @Override
    public Timeout newTimeout(TimerTask task, long delay, TimeUnit unit) {
        Objects.requireNonNull(task, "task");
        Objects.requireNonNull(unit, "unit");
        if (stopped) {
            throw new IllegalStateException("cannot be started once stopped");
        }
        long deadline = System.nanoTime() + Math.max(0, unit.toNanos(delay));
        Entry entry = new Entry(task, deadline);
        added.add(entry);
        // read after the add: the thread sets wakeAt before it looks at the queue a last time, so one of the two sees the other
        if (sleepingForGood || deadline - wakeAt < 0 || addedCount.incrementAndGet() % PURGE_EVERY == 0) {
            LockSupport.unpark(thread);
        }
        return entry;
    }

    @Override
    public Set<Timeout> stop() {
        stopped = true;
        LockSupport.unpark(thread);
        if (Thread.currentThread() == thread) {
            return Set.of(); // a task stopping its own timer: the thread ends as the task returns
        }
        boolean interrupted = false;
        while (thread.isAlive()) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        Set<Timeout> unprocessed = new HashSet<>();
        for (Entry entry : pending) {
            if (entry.isPending()) {
                unprocessed.add(entry);
            }
        }
        for (Entry entry; (entry = added.poll()) != null; ) {
            if (entry.isPending()) {
                unprocessed.add(entry);
            }
        }
        return unprocessed;
    }

    /** How many times the thread has woken, for tests. */
    int wakes() {
        return wakes;
    }

    private void run() {
        while (!stopped) {
            // a task that left this thread interrupted would have park() return at once, round after round
            Thread.interrupted();
            long now = System.nanoTime();
            any = false;
            takeIn(now);
            int kept = 0;
            for (Entry entry : pending) {
                if (!entry.isPending()) {
                    continue;
                }
                if (entry.deadline - now <= 0) {
                    entry.expire();
                    continue;
                }
                earlier(entry.deadline);
                pending.set(kept++, entry);
            }
            pending.subList(kept, pending.size()).clear();
            // A last look at the queue after saying when the thread wakes: a timeout added since the first look,
            // due sooner, was added either before this look (taken in here) or after it (its adder sees the new
            // wakeAt, or sleepingForGood, and wakes the thread). Only such a timeout makes the thread go round again.
            if (!any) {
                sleepingForGood = true;
                if (!takeIn(now) && !stopped) {
                    LockSupport.park(this);
                }
                sleepingForGood = false;
            } else {
                wakeAt = earliest;
                if (!takeIn(now) && !stopped) {
                    LockSupport.parkNanos(this, earliest - System.nanoTime());
                }
            }
            wakes++;
        }
    }

    /**
     * Takes in what was added (the pending ones into {@link #pending}); its deadlines bound the sleep even when
     * cancelled since (see the class comment). Whether one of them is due or sooner than the thread was to wake.
     */
    private boolean takeIn(long now) {
        boolean sooner = false;
        for (Entry entry; (entry = added.poll()) != null; ) {
            if (entry.deadline - now > 0) {
                sooner |= earlier(entry.deadline);
            } else if (entry.isPending()) {
                sooner = true; // due: run at the next round
            }
            if (entry.isPending()) {
                pending.add(entry);
            }
        }
        return sooner;
    }

    /** Makes {@code deadline} the earliest, if it is; whether it was. */
    private boolean earlier(long deadline) {
        if (any && deadline - earliest >= 0) {
            return false;
        }
        earliest = deadline;
        any = true;
        return true;
    }

    /** One timeout: its task, its deadline and its state, which moves once from pending to cancelled or expired. */
    private final class Entry implements Timeout {
        private static final int PENDING = 0;
        private static final int CANCELLED = 1;
        private static final int EXPIRED = 2;

        private final TimerTask task;
        private final long deadline;
        private volatile int state; // PENDING

        Entry(TimerTask task, long deadline) {
            this.task = task;
            this.deadline = deadline;
        }

        boolean isPending() {
            return state == PENDING;
        }

        void expire() {
            if (!STATE.compareAndSet(this, PENDING, EXPIRED)) {
                return;
            }
            try {
                task.run(this);
            } catch (Throwable t) {
                LOG.log(System.Logger.Level.WARNING, "a timeout's task failed", t);
            }
        }

        @Override
        public Timer timer() {
            return DeadlineTimer.this;
        }

        @Override
        public TimerTask task() {
            return task;
        }

        @Override
        public boolean isExpired() {
            return state == EXPIRED;
        }

        @Override
        public boolean isCancelled() {
            return state == CANCELLED;
        }

        @Override
        public boolean cancel() {
            return STATE.compareAndSet(this, PENDING, CANCELLED);
        }
    }
}
