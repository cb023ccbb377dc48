package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A rule as the scripts take it: the script that decides it, and the arguments that depend on the rule only,
 * made once per rule; {@link #arguments} adds a decision's own. Making them checks that the rule stays inside the
 * range where Lua's doubles are exact ({@link #checkFits}; the store's class comment lists the bounds, and each
 * script's header says how its arithmetic stays exact inside them).
 *
 * @param script the script that decides the rule
 * @param fixed  its arguments that depend on the rule only
 */
record RuleScript(Script script, String[] fixed) {
    private static final long NS = 1_000_000L;
    private static final long EXACT = 1L << 53;
    private static final long HALF_EXACT = 1L << 52;
    /** The most entries a sliding log may hold on Redis: its amount. */
    static final long MOST_LOG_ENTRIES = 10_000;
    /** 2^52 ns (about 52.1 days), less one: the longest max delay the scripts keep exact (see ruleArguments). */
    static final long LONGEST_DELAY_NANOS = HALF_EXACT - 1;
    /** With a time passed in, Redis's own clock says nothing of when a key is untouched: keep keys an hour more. */
    private static final long EXPLICIT_TIME_TTL_MARGIN_MS = 3_600_000L;

    /** Every rule: one limit or several, any algorithm. */
    static final Script DECIDE = Script.load("decide.lua");
    /** The common case, for less work in Redis: one gcra limit (gcra, greedy token-bucket, leaky-bucket). */
    static final Script GCRA = Script.load("gcra.lua");

    /** A script as sent: its text (for EVAL after a NOSCRIPT) and its SHA-1 (for EVALSHA). */
    record Script(String text, String sha) {
        static Script load(String name) {
            String text;
            try (InputStream in = RuleScript.class.getResourceAsStream(name)) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException | NullPointerException e) {
                throw new IllegalStateException(name + " is missing from sluice-redis", e);
            }
            return new Script(text, sha1(text));
        }
    }

    /**
     * The script for {@code rule} and its arguments that depend on the rule only: decide.lua's with the first
     * three and the sixth left per call; gcra.lua's without the one per decision at their end.
     */
    static RuleScript of(Rule rule) {
        String[] general = ruleArguments(rule); // checks every bound, whichever script decides
        if (rule.limits().size() != 1 || code(rule.algorithm(), rule.limits().get(0)) != 4) {
            return new RuleScript(DECIDE, general);
        }
        Limit limit = rule.limits().get(0);
        long amount = limit.amount();
        long period = limit.periodNanos();
        long tq = period / amount;
        long tr = period % amount;
        long burstStep = limit.burst() * tr; // B·tr < B·L < 2^53 (checked)
        long dq = limit.burst() * tq + burstStep / amount;
        long dr = burstStep % amount;
        String[] fixed = {general[3], general[4], Long.toString(EXPLICIT_TIME_TTL_MARGIN_MS),
                Long.toString(amount), Long.toString(limit.burst()), Long.toString(period),
                Long.toString(tq), Long.toString(tr), Long.toString(dq), Long.toString(dr)};
        return new RuleScript(GCRA, fixed);
    }

    /** Whether decisions of this rule may share one call of the script: gcra.lua decides several keys in turn. */
    boolean batchable() {
        return script == GCRA;
    }

    /**
     * The arguments of one decision's call at {@code nowNanos} ({@link Store#STORE_CLOCK}: the server's): gcra.lua
     * takes the decision's own last, decide.lua first.
     */
    String[] arguments(long cost, long nowNanos) {
        if (script == GCRA) {
            String[] arguments = Arrays.copyOf(fixed, fixed.length + 1);
            arguments[fixed.length] = gcraArgument(cost, nowNanos);
            return arguments;
        }
        boolean serverClock = nowNanos == Store.STORE_CLOCK;
        String[] arguments = fixed.clone();
        arguments[0] = serverClock ? "" : Long.toString(nowNanos / NS);
        arguments[1] = serverClock ? "" : Long.toString(nowNanos % NS);
        arguments[2] = Long.toString(cost);
        arguments[5] = serverClock ? "0" : Long.toString(EXPLICIT_TIME_TTL_MARGIN_MS);
        return arguments;
    }

    /**
     * gcra.lua's one argument for a decision: its cost alone at the server's clock, or {@code "cost ms ns"} at
     * a time passed in. One argument, not three, is less for Redis to parse (the script says how much).
     */
    static String gcraArgument(long cost, long nowNanos) {
        return nowNanos == Store.STORE_CLOCK ? Long.toString(cost)
                : cost + " " + nowNanos / NS + " " + nowNanos % NS;
    }

    /**
     * Checks that a Redis store can decide {@code rule} exactly.
     *
     * @throws IllegalArgumentException naming the limit (or max delay) beyond Lua's exact range
     */
    static void checkExact(Rule rule) {
        ruleArguments(rule);
    }

    /** The script's arguments that depend on the rule only; the first three and the sixth are per call. */
    private static String[] ruleArguments(Rule rule) {
        // -1: a shaping rule with no max delay (Rule.NO_MAX_DELAY is past what Lua keeps exact)
        long maxDelay = rule.hasMaxDelay() ? rule.maxDelayNanos() : rule.mode() == Mode.SHAPING ? -1 : 0;
        List<String> arguments = new ArrayList<>(List.of("", "", "",
                Integer.toString(rule.mode().ordinal()), Long.toString(maxDelay), "",
                Integer.toString(rule.limits().size())));
        if (maxDelay >= HALF_EXACT) {
            throw new IllegalArgumentException("max delay " + dev.sluice.DurationFormat.format(rule.maxDelayNanos())
                    + " is too long for the Redis store: it must be under 2^52 ns (52.1 days)");
        }
        for (Limit limit : rule.limits()) {
            checkFits(limit, rule.algorithm());
            checkRefillsFit(limit, rule);
            arguments.add(Integer.toString(code(rule.algorithm(), limit)));
            arguments.add(Long.toString(limit.amount()));
            arguments.add(Long.toString(limit.periodNanos() / NS));
            arguments.add(Long.toString(limit.burst()));
        }
        return arguments.toArray(String[]::new);
    }

    /** decide.lua's code of the algorithm; no default, so that a new algorithm is a compile error here. */
    private static int code(Algorithm algorithm, Limit limit) {
        return switch (algorithm) {
            case FIXED_WINDOW -> 1;
            case SLIDING_LOG -> 2;
            case SLIDING_WINDOW -> 3;
            case TOKEN_BUCKET -> limit.refill() == Refill.INTERVAL ? 5 : 4;
            case GCRA, LEAKY_BUCKET -> 4;
        };
    }

    /**
     * Whether {@code a × b} (both positive) is below {@code bound}, the product taken whole: a product past 2^63
     * wraps round, to a small number or a negative one, and passed a plain comparison (a review found 2^40 × 2^40
     * let by, then 2^63 itself).
     */
    static boolean below(long a, long b, long bound) {
        long product = a * b;
        return Math.multiplyHigh(a, b) == 0 && product >= 0 && product < bound;
    }

    /** Refuses a limit whose arithmetic could leave the doubles' exact range (RedisStore's class comment lists it). */
    static void checkFits(Limit limit, Algorithm algorithm) {
        long period = limit.periodNanos();
        String refused = null;
        String why = " (Lua's numbers are exact only up to 2^53)"; // the reason of all but two (a review)
        if (period % NS != 0) {
            refused = "its period is not a whole number of milliseconds, the unit the scripts keep times in";
            why = "";
        } else if (period >= EXACT) {
            refused = "its period is 2^53 ns (104.2 days) or longer";
        } else if (!below(limit.amount(), period / NS, EXACT)) {
            refused = "L × P(ms) is 2^53 or more";
        } else if (algorithm == Algorithm.SLIDING_WINDOW && period >= HALF_EXACT) {
            // a window's waits reach two periods (until the previous window weighs nothing): past 2^53 ns they
            // rounded, one nanosecond off (a review found it)
            refused = "a sliding window's two periods reach 2^53 ns (its period is 2^52 ns, 52.1 days, or longer)";
        } else if (algorithm == Algorithm.SLIDING_LOG && limit.amount() > MOST_LOG_ENTRIES) {
            // the log is copied whole as Redis reads and writes it at each decision, blocking Redis: when every
            // entry was parsed too, 100,000 entries took 90 ms a decision, past the store's timeout, which the
            // failure policy then decided (a review measured it); now 10,000 take about 0.5 ms
            refused = "a sliding log of more than " + MOST_LOG_ENTRIES + " entries costs Redis a copy of them all at"
                    + " each decision (about 0.5 ms at 10,000); sliding-window decides in a few numbers";
            why = "";
        } else if (algorithm.hasBurst() && !below(limit.burst(), limit.amount(), EXACT)) {
            refused = "B × L is 2^53 or more";
        } else if (algorithm.hasBurst() && BigInteger.valueOf(limit.burst()).multiply(BigInteger.valueOf(period))
                .divide(BigInteger.valueOf(limit.amount())).compareTo(BigInteger.valueOf(HALF_EXACT)) >= 0) {
            refused = "B × P / L is 2^52 ns (52.1 days) or longer";
        }
        if (refused != null) {
            throw new IllegalArgumentException("limit " + limit + " is beyond the Redis store: " + refused + why);
        }
    }

    /**
     * The longest max delay {@code rule} may take on Redis: 2^52 ns less one, and, for an interval refill, less than
     * 2^53 ns with its {@code ⌈B / L⌉} periods, and short enough for its debt to stay below 2^53
     * ({@link #checkRefillsFit}), so that {@code RateLimiter.acquire} never asks for a delay the store then refuses (a
     * review found it thrown).
     */
    static long longestDelayNanos(Rule rule) {
        long longest = LONGEST_DELAY_NANOS;
        if (rule.algorithm() == Algorithm.TOKEN_BUCKET) {
            for (Limit limit : rule.limits()) {
                if (limit.refill() == Refill.INTERVAL) {
                    long refills = (limit.burst() + limit.amount() - 1) / limit.amount();
                    BigInteger spare = BigInteger.valueOf(EXACT - 1).subtract(BigInteger.valueOf(refills)
                            .multiply(BigInteger.valueOf(limit.periodNanos())));
                    longest = Math.min(longest, Math.max(0, spare.min(BigInteger.valueOf(Long.MAX_VALUE)).longValue()));
                    longest = Math.min(longest, longestDebtDelayNanos(limit));
                }
            }
        }
        return longest;
    }

    /**
     * The longest max delay an interval refill's tokens stay exact with: in delay mode they go into debt, down to
     * {@code -(max_delay / P + 2) × max(L, B)} (the refills a delay may count on, as {@code Rule} bounds them by
     * 2^61), which must stay above -2^53, that is {@code max_delay < ((2^53 - 1) / max(L, B) - 1) × P}. A review
     * found a rate of 1.5·10^18 a second, with a delay of a second, whose debt rounded: a cost of 1 was lost in it,
     * and every request was admitted with the same delay (in memory, 480 of 1,000).
     */
    private static long longestDebtDelayNanos(Limit limit) {
        return Rule.longestDelayForDebt(limit, EXACT - 1);
    }

    /**
     * Refuses an interval refill whose {@code reset_after} could reach 2^53 ns. It is at most the max delay plus
     * {@code ⌈B / L⌉} periods (the refills from empty to full, the next one included). Those periods alone stay
     * under 2^53 ns, less than twice {@code B × P / L} or one period, so only a delay can take them past it. And one
     * whose debt could reach 2^53 ({@link #longestDebtDelayNanos}).
     */
    private static void checkRefillsFit(Limit limit, Rule rule) {
        if (rule.algorithm() != Algorithm.TOKEN_BUCKET || limit.refill() != Refill.INTERVAL) {
            return;
        }
        long refills = (limit.burst() + limit.amount() - 1) / limit.amount();
        if (BigInteger.valueOf(refills).multiply(BigInteger.valueOf(limit.periodNanos()))
                .add(BigInteger.valueOf(rule.maxDelayNanos())).compareTo(BigInteger.valueOf(EXACT)) >= 0) {
            throw new IllegalArgumentException("limit " + limit + " is beyond the Redis store: ⌈B / L⌉ × P plus the"
                    + " max delay (" + dev.sluice.DurationFormat.format(rule.maxDelayNanos()) + ") is 2^53 ns"
                    + " (104.2 days) or longer (Lua's numbers are exact only up to 2^53)");
        }
        if (rule.mode() == Mode.DELAY && rule.maxDelayNanos() > longestDebtDelayNanos(limit)) {
            throw new IllegalArgumentException("limit " + limit + " is beyond the Redis store: its debt over the max"
                    + " delay (" + dev.sluice.DurationFormat.format(rule.maxDelayNanos()) + "), max_delay / P + 2"
                    + " refills of " + Math.max(limit.amount(), limit.burst()) + ", reaches 2^53 (Lua's numbers are"
                    + " exact only up to 2^53); at most " + dev.sluice.DurationFormat.format(
                    longestDebtDelayNanos(limit)) + " here");
        }
    }

    private static String sha1(String text) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder(40);
            for (byte b : digest) {
                hex.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-1", e);
        }
    }
}
