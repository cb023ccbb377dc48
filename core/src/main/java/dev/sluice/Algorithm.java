package dev.sluice;

import java.util.Arrays;
import java.util.stream.Collectors;

/** The rate algorithms of the contract (docs/algorithms.md), by the names used in configuration. */
public enum Algorithm {
    FIXED_WINDOW("fixed-window"),
    SLIDING_LOG("sliding-log"),
    SLIDING_WINDOW("sliding-window"),
    TOKEN_BUCKET("token-bucket"),
    GCRA("gcra"),
    LEAKY_BUCKET("leaky-bucket");

    private final String label;

    Algorithm(String label) {
        this.label = label;
    }

    /** The name used in configuration and on the command line, such as {@code sliding-window}. */
    public String label() {
        return label;
    }

    /** Whether the algorithm has a capacity {@code B} apart from {@code L} (token-bucket, gcra, leaky-bucket). */
    public boolean hasBurst() {
        return this == TOKEN_BUCKET || this == GCRA || this == LEAKY_BUCKET;
    }

    /** Whether {@link Mode#DELAY} applies: the algorithms that can reserve future capacity. */
    public boolean canDelay() {
        return this == TOKEN_BUCKET || this == GCRA;
    }

    /** Whether a limit may choose its refill ({@link Refill}): token-bucket's greedy or interval. */
    public boolean hasRefill() {
        return this == TOKEN_BUCKET;
    }

    /**
     * Why a burst is refused for this algorithm, or null where it has one: the one text that the builder, the
     * configuration file (at the burst's line) and {@code simulate --burst} say.
     */
    public String refusesBurst() {
        return hasBurst() ? null : "burst is for token-bucket, gcra and leaky-bucket, not " + this;
    }

    /** Why a refill is refused for this algorithm, or null where it takes one; said as {@link #refusesBurst} is. */
    public String refusesRefill() {
        return hasRefill() ? null : "refill is for token-bucket, not " + this;
    }

    /**
     * The mode that a file's or a command line's {@code delay} means: leaky-bucket's delay is its queue,
     * {@link Mode#SHAPING}; the others' is {@link Mode#DELAY}.
     */
    public Mode delayMode() {
        return this == LEAKY_BUCKET ? Mode.SHAPING : Mode.DELAY;
    }

    public static Algorithm parse(String text) {
        for (Algorithm algorithm : values()) {
            if (algorithm.label.equals(text)) {
                return algorithm;
            }
        }
        throw new IllegalArgumentException("unknown algorithm \"" + text + "\": expected one of "
                + Arrays.stream(values()).map(Algorithm::label).collect(Collectors.joining(", ")));
    }

    @Override
    public String toString() {
        return label;
    }
}
