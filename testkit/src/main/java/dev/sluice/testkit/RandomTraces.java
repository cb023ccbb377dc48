package dev.sluice.testkit;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Random traces that visit the edges: bursts at one instant, gaps around a period, costs of 0 (peeks), of 1,
 * and above the capacity, a few keys, and now and then a request stamped earlier than the one before.
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
            t += gap(random, periodNanos);
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

    private static long gap(Random random, long period) {
        return switch (random.nextInt(8)) {
            case 0, 1, 2 -> 0;                                             // at the same instant
            case 3 -> 1 + random.nextInt(1000);                            // nanoseconds apart
            case 4 -> (long) (random.nextDouble() * period / 10);          // a fraction of a period
            case 5 -> period / 10 * random.nextInt(4);                     // on round fractions
            case 6 -> (long) (random.nextDouble() * period);               // up to a period
            default -> period * (1 + random.nextInt(2)) + random.nextInt(3) - 1; // about a period or two
        };
    }
}
