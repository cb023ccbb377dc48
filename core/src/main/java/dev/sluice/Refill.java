package dev.sluice;

import java.util.Locale;

/** How a token bucket gets its tokens back. */
public enum Refill {
    /**
     * Continuously, {@code L/P} tokens per nanosecond, as Bucket4j's greedy refill. A key starts full, and a cost
     * above its burst is never admitted; Guava's {@code RateLimiter} starts empty and lets any cost through by
     * making the next request wait for it.
     */
    GREEDY,
    /** {@code L} tokens at once every {@code P}, counted from the request that found the bucket full. */
    INTERVAL;

    /** The name used in configuration and on the command line: {@code greedy} or {@code interval}. */
    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static Refill parse(String text) {
        for (Refill refill : values()) {
            if (refill.label().equals(text)) {
                return refill;
            }
        }
        throw new IllegalArgumentException("unknown refill \"" + text + "\": expected greedy or interval");
    }
}
