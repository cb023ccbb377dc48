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
