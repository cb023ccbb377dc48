package dev.sluice.testkit;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Random traces that visit the edges: bursts at one instant, gaps around a period, requests on a window's edge (of
 * the period and of its tenths and other fractions: the shorter periods of stacked limits) and a nanosecond either
 * side of it, idle spells long enough for a key to be forgotten, costs of 0 (peeks), of 1, and above the capacity, a
 * few keys, and now and then a request stamped earlier than the one before.
 */
public final class RandomTraces {
    private RandomTraces() {
    }

    /**
     * @param seed           the random seed (print it with a failure)
     * @param length         how many requests
     * @param periodNanos    the scale of the gaps between requests
     * @param maxCost        the largest cost drawn (draw above the capacity to see "never")
     * @param backwards      whether some requests go back in time
     * @param startNanos     the time of the first request
     */
    public static List<Request> generate(long seed, int length, long periodNanos, long maxCost, boolean backwards,
                                         long startNanos) {
        Random random = new Random(seed);
        List<Request> trace = new ArrayList<>(length);
        long t = startNanos;
        String[] keys = {"a", "b", "user:42|route:/search"};
        int keyCount = 1 + random.nextInt(keys.length);
        for (int i = 0; i < length; i++) {
            t += gap(random, periodNanos, t);
            long stamp = t;
            if (backwards && random.nextInt(20) == 0) {
                stamp = Math.max(startNanos, t - 1 - (long) (random.nextDouble() * periodNanos));
            }
            long cost = switch (random.nextInt(10)) {
                case 0 -> 0;
                case 1, 2 -> 1 + random.nextInt((int) maxCost);
                default -> 1;
            };
            trace.add(new Request(stamp, keys[random.nextInt(keyCount)], cost));
        }
        return trace;
    }

    private static long gap(Random random, long period, long t) {
        return switch (random.nextInt(10)) {
            case 0, 1, 2 -> 0;                                             // at the same instant
            case 3 -> 1 + random.nextInt(1000);                            // nanoseconds apart
            case 4 -> (long) (random.nextDouble() * period / 10);          // a fraction of a period
            case 5 -> period / 10 * random.nextInt(4);                     // on round fractions
            case 6 -> (long) (random.nextDouble() * period);               // up to a period
            case 7 -> toAnEdge(random, period, t);                         // a window's edge, or a ns either side
            case 8 -> random.nextInt(4) == 0                               // now and then idle many periods: the
                    ? idle(random, period, t)                                   // key untouched, and forgotten
                    : toAnEdge(random, period, t);
            default -> period * (1 + random.nextInt(2)) + random.nextInt(3) - 1; // about a period or two
        };
    }

    /** Idle from 3 to 62 periods, but never past an eighth of the time left before the last time a rule takes. */
    private static long idle(Random random, long period, long t) {
        long room = (dev.sluice.algorithm.Rule.MAX_TIME_NANOS - t) / 8;
        long periods = 3 + random.nextInt(60);
        long spell = period > room / periods ? room : period * periods; // no overflow for a period of years
        return Math.max(0, spell + random.nextInt(3) - 1);
    }

    /**
     * The gap from {@code t} to the next edge of a window of {@code period / k} (k from 1 to 10: windows aligned to
     * the epoch, as fixed windows are, and the shorter periods of stacked limits), give or take a nanosecond; a
     * review found the traces reached an edge only by chance once a gap had left the grid.
     */
    private static long toAnEdge(Random random, long period, long t) {
        long window = Math.max(1, period / (1 + random.nextInt(10)));
        long edge = (Math.floorDiv(t, window) + 1) * window;
        return Math.max(0, edge - t + random.nextInt(3) - 1);
    }
}
