package dev.sluice.server;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.logging.Filter;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The log of Lettuce, the client of a Redis Cluster store, as a server keeps it: its warnings said once, not in
 * a stream, and nothing of its own while a store is opened, since the server's one error line tells a failure then.
 *
 * <p>Why, found by a review: a Cluster seed that is not a Redis (an HTTP server, say) printed Lettuce's 30-line
 * stack trace before the server's own error line, which said the same; and while a master is down Lettuce warns
 * "Unable to connect" at each refresh of the topology, each second while its breaker opens and probes, the same
 * two lines again and again. Each distinct warning is now let through once in {@link #REPEAT_AFTER}; the store's
 * metrics ({@code sluice_store_up}, the breaker's openings) tell the outage meanwhile.
 */
public final class LettuceLog {
    /** How long a warning said is not said again. */
    static final Duration REPEAT_AFTER = Duration.ofSeconds(60);
    /** Held, so that its level stays: java.util.logging keeps its loggers weakly. */
    private static final Logger LETTUCE = Logger.getLogger("io.lettuce");
    /**
     * The loggers that repeat while a node is down: the topology's refresh and a connection's reconnects. Each has
     * the filter itself, since a logger's filter is not asked for its children's records. Held, as above.
     */
    private static final List<Logger> REPEATING = List.of(
            Logger.getLogger("io.lettuce.core.cluster.topology.DefaultClusterTopologyRefresh"),
            Logger.getLogger("io.lettuce.core.protocol.ConnectionWatchdog"));
    /** When each warning was last let through, the most recent 256. */
    private static final Map<String, Long> SAID = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
            return size() > 256;
        }
    };

    private LettuceLog() {
    }

    /** Lets each distinct record of Lettuce's through once in {@link #REPEAT_AFTER} (set once, for the process). */
    public static synchronized void sayOnce() {
        if (REPEATING.get(0).getFilter() != null) {
            return;
        }
        Filter once = record -> {
            String message = record.getLoggerName() + " " + record.getMessage();
            long now = System.nanoTime();
            synchronized (SAID) {
                Long last = SAID.get(message);
                if (last != null && now - last < REPEAT_AFTER.toNanos()) {
                    return false;
                }
                SAID.put(message, now);
                return true;
            }
        };
        REPEATING.forEach(logger -> logger.setFilter(once));
    }

    /** {@code opening}'s answer, with nothing of Lettuce's logged meanwhile. */
    public static synchronized <T> T silentWhile(Supplier<T> opening) {
        Level level = LETTUCE.getLevel();
        LETTUCE.setLevel(Level.OFF);
        try {
            return opening.get();
        } finally {
            LETTUCE.setLevel(level);
        }
    }
}
