package dev.sluice.server;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * A log that says each kind of thing at most once every {@link #QUIET}: what happens again meanwhile is counted, and
 * the next line of its kind says how many were left out. What fails, or is refused, once in a while is worth a line
 * each time; what happens to every request for minutes (an upstream down, a client hammering a limit) would bury
 * the log, and the operator's disk, under the same line. nginx writes one for each; this writes one for each kind
 * every ten seconds, with the count.
 */
public final class QuietLog {
    /** The least time between two lines of one kind. */
    public static final long QUIET = TimeUnit.SECONDS.toNanos(10);
    /** The most kinds remembered: past it all are forgotten (each then said again at once), never a map that grows. */
    private static final int MOST_KINDS = 1_000;

    /** When a kind was last said (CAS: one of many threads says it), and how often it was left out since. */
    private static final class Kind {
        final AtomicLong said;
        final AtomicLong unsaid = new AtomicLong();

        Kind(long said) {
            this.said = new AtomicLong(said);
        }
    }

    private final System.Logger log;
    private final System.Logger.Level level;
    private final long quiet;
    private final ConcurrentHashMap<String, Kind> kinds = new ConcurrentHashMap<>();

    public QuietLog(System.Logger log, System.Logger.Level level) {
        this(log, level, QUIET);
    }

    /** A log whose kinds are each said at most once every {@code quietNanos} (a test's, shorter than ten seconds). */
    QuietLog(System.Logger log, System.Logger.Level level, long quietNanos) {
        this.log = log;
        this.level = level;
        this.quiet = quietNanos;
    }

    /**
     * Logs {@code line} (made only if it is logged), unless a line of {@code kind} was logged within the last
     * {@link #QUIET} (or the quiet this was made with): then it is counted, and the next line of its kind ends with
     * how many {@code what} were left out.
     */
    public void say(String kind, Supplier<String> line, String what) {
        long now = System.nanoTime();
        Kind known = kinds.get(kind);
        if (known == null) {
            if (kinds.size() >= MOST_KINDS) {
                kinds.clear();
            }
            known = kinds.computeIfAbsent(kind, k -> new Kind(now - quiet));
        }
        long said = known.said.get();
        if (now - said < quiet || !known.said.compareAndSet(said, now)) {
            known.unsaid.incrementAndGet();
            return;
        }
        long more = known.unsaid.getAndSet(0);
        log.log(level, line.get() + (more == 0 ? "" : " (" + more + " more " + what + " since the last line, not logged)"));
    }
}
