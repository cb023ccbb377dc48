package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A separate process for {@link MultiProcessConcurrencyTest}: {@code threads} threads decide {@code attempts}
 * times each on one key of a Redis store, from a common start instant, and it prints how many were admitted.
 *
 * <p>Arguments: uri algorithm limit key threads attempts startEpochMillis timeNanos ("server" for Redis's clock).
 */
public final class Hammer {
    private Hammer() {
    }

    public static void main(String[] args) throws Exception {
        String uri = args[0];
        Rule rule = Rule.of(Algorithm.parse(args[1]), List.of(Limit.parse(args[2])));
        String key = args[3];
        int threads = Integer.parseInt(args[4]);
        int attempts = Integer.parseInt(args[5]);
        long start = Long.parseLong(args[6]);
        long time = args[7].equals("server") ? Store.STORE_CLOCK : Long.parseLong(args[7]);
        try (RedisStore store = RedisStore.builder(uri).timeout(java.time.Duration.ofSeconds(5)).build()) {
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            List<Future<Long>> runs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                runs.add(pool.submit(() -> {
                    while (System.currentTimeMillis() < start) {
                        Thread.onSpinWait();
                    }
                    long admitted = 0;
                    for (int i = 0; i < attempts; i++) {
                        admitted += store.decide(rule, key, 1, time).allowed() ? 1 : 0;
                    }
                    return admitted;
                }));
            }
            long admitted = 0;
            for (Future<Long> run : runs) {
                admitted += run.get();
            }
            pool.shutdown();
            RedisStore.Counts counts = store.counts();
            if (counts.failures() + counts.shortCircuited() > 0) {
                System.out.println("failures " + counts);
                System.exit(1);
            }
            System.out.println(admitted);
        }
    }
}
