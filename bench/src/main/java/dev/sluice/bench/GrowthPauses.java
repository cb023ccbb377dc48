package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;

import java.util.List;
import java.util.Locale;

/**
 * The longest single decision while the in-memory store grows: one thread puts 3,000,000 new keys in (the
 * table resizes as it grows), another meanwhile decides on 1,000 known keys. The inserting thread pays for
 * the moves it makes; what the other thread sees is what every other caller of a growing store sees. Run it
 * with a collector whose pauses are short, or the collector's pauses are what it measures:
 *
 * <pre>java -XX:+UseZGC -Xmx8g -cp bench/target/benchmarks.jar dev.sluice.bench.GrowthPauses</pre>
 */
public final class GrowthPauses {
    private static final int NEW_KEYS = 3_000_000;
    private static final int KNOWN_KEYS = 1_000;
    private static volatile boolean grown;

    private GrowthPauses() {
    }

    public static void main(String[] args) throws Exception {
        InMemoryStore store = InMemoryStore.builder().maxKeys(2L * NEW_KEYS).build();
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("100/1h")));
        long t = 1_700_000_000L * 1_000_000_000L;
        for (int i = 0; i < KNOWN_KEYS; i++) {
            store.decide(rule, "known-" + i, 1, t);
        }
        long[] longestKnown = new long[1];
        Thread known = new Thread(() -> {
            for (int i = 0; !grown; i++) {
                long start = System.nanoTime();
                store.decide(rule, "known-" + (i % KNOWN_KEYS), 0, t);
                longestKnown[0] = Math.max(longestKnown[0], System.nanoTime() - start);
            }
        });
        known.start();
        long longestInsertion = 0;
        for (int i = 0; i < NEW_KEYS; i++) {
            long start = System.nanoTime();
            store.decide(rule, "user-" + i, 1, t);
            longestInsertion = Math.max(longestInsertion, System.nanoTime() - start);
        }
        grown = true;
        known.join();
        System.out.printf(Locale.ROOT, "longest insertion (the thread that moves the table) %.1f ms; "
                + "longest decision on a known key (another thread) %.1f ms; %d keys%n",
                longestInsertion / 1e6, longestKnown[0] / 1e6, store.size());
    }
}
