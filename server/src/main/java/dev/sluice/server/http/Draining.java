package dev.sluice.server.http;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * How the servers of one port (one per event loop) stop when the process is asked to ({@code SIGTERM}): as nginx's
 * graceful quit, not by cutting every connection. A review found the gateway, stopped, drop the requests it held
 * for their turn and those waiting on the upstream with no answer at all, charged, though the upstream did the work.
 *
 * <ol>
 *   <li>A connection accepted from then on is closed at once; a request that comes on one already open is answered
 *       with {@code Connection: close}.</li>
 *   <li>Each connection is closed as soon as it carries no request: at once when idle, else once its answer is
 *       over.</li>
 *   <li>Until the deadline, the requests being handled go on: decided, held for their turn, forwarded, answered.
 *       What is left then is the caller's to end ({@link Gateway} answers the requests it still holds 503); closing
 *       the servers cuts the rest.</li>
 * </ol>
 */
final class Draining {
    /** How often each loop looks for connections whose answer is over, while it drains. */
    static final long SCAN_MS = 20;

    private final List<IdleClients> loops = new CopyOnWriteArrayList<>();
    private final AtomicBoolean started = new AtomicBoolean();

    /** The connections of one more server's loop. */
    void add(IdleClients loop) {
        loops.add(loop);
    }

    /** Whether the servers drain: no new connection is kept. */
    boolean started() {
        return started.get();
    }

    /** Starts draining on every loop, once. */
    void start() {
        if (started.compareAndSet(false, true)) {
            loops.forEach(IdleClients::drain);
        }
    }

    /**
     * Waits until no connection is open or {@code deadlineNanos} (on {@link System#nanoTime()}) has come.
     *
     * @return whether every connection is closed
     */
    boolean await(long deadlineNanos) throws InterruptedException {
        while (open() > 0) {
            long left = deadlineNanos - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            Thread.sleep(Math.min(SCAN_MS, Math.max(1, TimeUnit.NANOSECONDS.toMillis(left))));
        }
        return true;
    }

    /** The connections open over every loop. */
    int open() {
        int open = 0;
        for (IdleClients loop : loops) {
            open += loop.open();
        }
        return open;
    }
}
