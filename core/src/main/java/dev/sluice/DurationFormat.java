package dev.sluice;

/**
 * Durations as Sluice writes them: a whole number and a unit, {@code 500ms}, {@code 10s}, {@code 1m},
 * {@code 2h}, {@code 1d}. Parsed to nanoseconds; printed in the largest unit that divides exactly.
 */
public final class DurationFormat {
    /** The longest duration Sluice accepts anywhere, 2^58 ns (about 9 years): sums of a few stay in a long. */
    public static final long MAX_NANOS = 1L << 58;

    private static final String[] UNITS = {"d", "h", "m", "s", "ms", "us", "ns"};
    private static final long[] NANOS = {86_400_000_000_000L, 3_600_000_000_000L, 60_000_000_000L,
            1_000_000_000L, 1_000_000L, 1_000L, 1L};

    /** {@link #MAX_NANOS} in whole days, as messages that refuse a longer duration say it (after the units it uses). */
    public static final String LONGEST = format(MAX_NANOS / 86_400_000_000_000L * 86_400_000_000_000L);

    private DurationFormat() {
    }

    /**
     * Parses {@code 10s}; a missing number means one ({@code s} is {@code 1s}).
     *
     * @throws IllegalArgumentException naming the text, when it is not a whole number and a known unit,
     *                                  or when it is longer than {@link #MAX_NANOS}
     */
    public static long parseNanos(String text) {
        if (text == null) {
            throw new IllegalArgumentException("a duration is required, as 10s or 500ms; got null");
        }
        int digits = 0;
        while (digits < text.length() && text.charAt(digits) >= '0' && text.charAt(digits) <= '9') { // ASCII only
            digits++;
        }
        String unit = text.substring(digits);
        for (int i = 0; i < UNITS.length; i++) {
            if (UNITS[i].equals(unit)) {
                long count = 1;
                if (digits > 0) {
                    count = parseCount(text, text.substring(0, digits));
                }
                if (count > MAX_NANOS / NANOS[i]) {
                    throw new IllegalArgumentException("duration \"" + text + "\" is too long (at most "
                            + LONGEST + ")");
                }
                return count * NANOS[i];
            }
        }
        throw new IllegalArgumentException("bad duration \"" + text
                + "\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s");
    }

    private static long parseCount(String text, String digits) {
        try {
            return Long.parseLong(digits);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("duration \"" + text + "\" is too long", e);
        }
    }

    /** Prints nanoseconds in the largest unit that divides them exactly: {@code 60_000_000_000} is {@code 1m}. */
    public static String format(long nanos) {
        if (nanos == 0) {
            return "0s";
        }
        for (int i = 0; i < UNITS.length; i++) {
            if (nanos % NANOS[i] == 0) {
                return nanos / NANOS[i] + UNITS[i];
            }
        }
        throw new AssertionError("every whole number of nanoseconds has a unit");
    }

    /**
     * {@code duration} in nanoseconds, {@link Long#MAX_VALUE} when it is longer ({@link java.time.Duration#toNanos}
     * throws instead): a duration past any bound is then refused by the bound's own check, naming it, or taken as
     * "as long as it gets".
     */
    public static long saturatedNanos(java.time.Duration duration) {
        if (duration.getSeconds() >= Long.MAX_VALUE / 1_000_000_000L) {
            return Long.MAX_VALUE;
        }
        if (duration.getSeconds() < Long.MIN_VALUE / 1_000_000_000L) {
            return Long.MIN_VALUE;
        }
        return duration.toNanos();
    }

    /** Whole milliseconds, rounded up, as every Sluice output prints durations; -1 ("never") stays -1. */
    public static long toMillisCeil(long nanos) {
        return ceil(nanos, 1_000_000L);
    }

    /** Whole seconds, rounded up, as HTTP headers carry durations; -1 ("never") stays -1. */
    public static long toSecondsCeil(long nanos) {
        return ceil(nanos, 1_000_000_000L);
    }

    private static long ceil(long nanos, long unit) {
        if (nanos < 0) {
            return nanos;
        }
        return nanos / unit + (nanos % unit == 0 ? 0 : 1);
    }
}
