package dev.sluice;

import java.util.Locale;

/** What a limiter does with a request that does not fit at once. */
public enum Mode {
    /** A wall: the request is rejected and changes nothing (HTTP 429). */
    REJECT,
    /**
     * A valve: a request that would fit within {@code max_delay} is admitted now with {@code delay} set to
     * its wait, and its cost is reserved (token-bucket and gcra). One that needs longer is rejected.
     */
    DELAY,
    /**
     * Leaky-bucket as a FIFO queue: every admitted request gets {@code delay} = the time the queue ahead of it
     * takes to drain, so admitted requests leave at a constant rate.
     */
    SHAPING;

    /** The name used in configuration and on the command line: {@code reject}, {@code delay}, {@code shaping}. */
    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static Mode parse(String text) {
        for (Mode mode : values()) {
            if (mode.label().equals(text)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("unknown mode \"" + text + "\": expected reject, delay or shaping");
    }
}
