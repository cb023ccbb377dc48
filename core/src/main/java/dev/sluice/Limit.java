package dev.sluice;

import java.time.Duration;

/**
 * A limit {@code L/P}: {@code amount} units of cost per {@code period}, with the capacity {@code burst}
 * ({@code B}, for token-bucket, gcra and leaky-bucket; {@code L} unless given) and, for token-bucket, how it
 * refills.
 *
 * <p>Written as {@code 600/1m}, or with options {@code 600/1m burst=1000 refill=interval}. The bounds keep
 * every product and sum of the algorithms inside a {@code long}: {@code L} and {@code B} at most 2^40,
 * {@code P} at most {@link DurationFormat#MAX_NANOS}.
 */
public record Limit(long amount, long periodNanos, long burst, Refill refill) {
    /** The largest amount or burst: 2^40, about 1.1·10^12. */
    public static final long MAX_AMOUNT = 1L << 40;

    public Limit {
        if (amount < 1 || amount > MAX_AMOUNT) {
            throw new IllegalArgumentException("limit amount must be between 1 and " + MAX_AMOUNT + ", got " + amount);
        }
        if (periodNanos < 1 || periodNanos > DurationFormat.MAX_NANOS) {
            throw new IllegalArgumentException("limit period must be > 0 and at most "
                    + DurationFormat.LONGEST
                    + ", got " + periodNanos + "ns");
        }
        if (burst < 1 || burst > MAX_AMOUNT) {
            throw new IllegalArgumentException("limit burst must be between 1 and " + MAX_AMOUNT + ", got " + burst);
        }
        if (refill == null) {
            throw new IllegalArgumentException("limit refill must be greedy or interval, got null");
        }
    }

    /** {@code amount} per {@code period}, burst = amount, greedy refill. */
    public static Limit of(long amount, Duration period) {
        if (period == null) {
            throw new IllegalArgumentException("limit period must not be null");
        }
        return new Limit(amount, DurationFormat.saturatedNanos(period), amount, Refill.GREEDY);
    }

    /** {@code amount} per {@code periodNanos}, burst = amount, greedy refill. */
    public static Limit of(long amount, long periodNanos) {
        return new Limit(amount, periodNanos, amount, Refill.GREEDY);
    }

    public Limit withBurst(long burst) {
        return new Limit(amount, periodNanos, burst, refill);
    }

    public Limit withRefill(Refill refill) {
        return new Limit(amount, periodNanos, burst, refill);
    }

    public Duration period() {
        return Duration.ofNanos(periodNanos);
    }

    /**
     * Parses {@code 600/1m}, optionally followed by {@code burst=B} and {@code refill=greedy|interval},
     * separated by spaces.
     *
     * @throws IllegalArgumentException that quotes the text and says what is wrong with it
     */
    public static Limit parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("bad limit: null; expected L/P such as 600/1m");
        }
        String[] words = text.trim().split("\\s+");
        int slash = words[0].indexOf('/');
        if (slash <= 0 || slash == words[0].length() - 1) {
            throw new IllegalArgumentException("bad limit \"" + text + "\": expected L/P such as 600/1m");
        }
        String amountText = words[0].substring(0, slash);
        String periodText = words[0].substring(slash + 1);
        try {
            long amount = parseWhole(amountText, "amount");
            long period = DurationFormat.parseNanos(periodText);
            if (period == 0) {
                throw new IllegalArgumentException("period must be > 0, got \"" + periodText + "\"");
            }
            Limit limit = new Limit(amount, period, amount, Refill.GREEDY);
            java.util.Set<String> given = new java.util.HashSet<>();
            for (int i = 1; i < words.length; i++) {
                int equals = words[i].indexOf('=');
                if (equals > 0 && !given.add(words[i].substring(0, equals))) {
                    throw new IllegalArgumentException(words[i].substring(0, equals) + " is given twice");
                }
                limit = limit.withOption(words[i]);
            }
            return limit;
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("bad limit \"" + text + "\": " + e.getMessage(), e);
        }
    }

    /**
     * Whether the limit written as {@code text} gives {@code option} ({@code burst} or {@code refill}) itself: a
     * rule-wide burst or refill would replace it, so a file or command line that gives both is refused.
     */
    public static boolean givesOption(String text, String option) {
        String[] words = text.trim().split("\\s+");
        for (int i = 1; i < words.length; i++) {
            if (words[i].startsWith(option + "=")) {
                return true;
            }
        }
        return false;
    }

    private Limit withOption(String word) {
        if (word.startsWith("burst=")) {
            return withBurst(parseWhole(word.substring(6), "burst"));
        }
        if (word.startsWith("refill=")) {
            return withRefill(Refill.parse(word.substring(7)));
        }
        throw new IllegalArgumentException("unknown option \"" + word + "\": expected burst=B or refill=greedy|interval");
    }

    private static long parseWhole(String text, String what) {
        if (text.isEmpty() || !text.chars().allMatch(c -> c >= '0' && c <= '9')) { // ASCII: not ٥, not ５
            throw new IllegalArgumentException(what + " must be a whole number >= 1, got \"" + text + "\"");
        }
        try {
            long value = Long.parseLong(text);
            if (value < 1 || value > MAX_AMOUNT) {
                throw new IllegalArgumentException(what + " must be between 1 and " + MAX_AMOUNT + ", got " + text);
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(what + " must be between 1 and " + MAX_AMOUNT + ", got " + text, e);
        }
    }

    /** {@code 600/1m}, with {@code burst=} and {@code refill=} only where they differ from the defaults. */
    @Override
    public String toString() {
        StringBuilder text = new StringBuilder().append(amount).append('/').append(DurationFormat.format(periodNanos));
        if (burst != amount) {
            text.append(" burst=").append(burst);
        }
        if (refill != Refill.GREEDY) {
            text.append(" refill=").append(refill.label());
        }
        return text.toString();
    }
}
