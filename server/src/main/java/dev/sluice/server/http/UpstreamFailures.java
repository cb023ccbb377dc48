package dev.sluice.server.http;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Why the gateway answered 502, told to the operator's log and not to the client: the reason names the upstream's
 * address and the network's internals ({@code finishConnect(..) failed: Connection refused: /10.0.3.7:3300}), which a
 * review found in the body every client got; nginx, too, answers a bare 502 and logs why. An upstream that is down
 * fails every request the same way, so a reason is logged again only after {@link #QUIET}, with how many 502s were not
 * logged meanwhile; another reason is logged at once.
 */
final class UpstreamFailures {
    /** The least time between two lines of the log that give the same reason. */
    static final long QUIET = TimeUnit.SECONDS.toNanos(10);
    private static final System.Logger LOG = System.getLogger("sluice");

    /** The reason logged last, and when. */
    private record Logged(String reason, long at) {
    }

    private final AtomicReference<Logged> last = new AtomicReference<>(new Logged("", System.nanoTime() - QUIET));
    private final AtomicLong unlogged = new AtomicLong();

    /** Logs {@code cause} as the reason of a 502, unless the same reason was logged within the last {@link #QUIET}. */
    void failed(Throwable cause) {
        String reason = cause == null ? "no reason given" : cause.getMessage() != null ? cause.getMessage()
                : cause.getClass().getName();
        long now = System.nanoTime();
        for (Logged before = last.get(); ; before = last.get()) {
            if (before.reason().equals(reason) && now - before.at() < QUIET) {
                unlogged.incrementAndGet();
                return;
            }
            if (last.compareAndSet(before, new Logged(reason, now))) {
                break; // another reason, or the same after a while: said
            }
        }
        long more = unlogged.getAndSet(0);
        LOG.log(System.Logger.Level.WARNING, "gateway: the upstream failed, answered 502: " + reason
                + (more == 0 ? "" : " (" + more + " more 502s since the last line, not logged)"));
    }
}
