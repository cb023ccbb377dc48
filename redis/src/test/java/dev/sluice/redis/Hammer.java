package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A separate process for {@link MultiProcessConcurrencyTest}: {@code threads} threads decide {@code attempts}
 * times each on one key of a Redis store. Once connected it prints {@code ready} and waits for a line on its
 * input, so that the test can start every process at once; then it prints how many were admitted and the wall
 * clock's milliseconds at its first and last decision, for the test to check that the processes overlapped.
 *
 * <p>Arguments: uri algorithm limits (joined by {@code +}) key threads attempts timeNanos ("server" for Redis's
 * clock).
 */
public final class Hammer {
    private Hammer() {
    }

    public static void main(String[] args) throws Exception {
        String uri = args[0];
        // several limits are joined by '+': 3000/1h+2000/1d
        Rule rule = Rule.of(Algorithm.parse(args[1]), java.util.Arrays.stream(args[2].split("\\+")).map(Limit::parse)
                .toList());
        String key = args[3];
        int threads = Integer.parseInt(args[4]);
        int attempts = Integer.parseInt(args[5]);
        long time = args[6].equals("server") ? Store.STORE_CLOCK : Long.parseLong(args[6]);
        try (RedisStore store = RedisStore.builder(uri).timeout(java.time.Duration.ofSeconds(5)).build()) {
            store.decide(rule, "warm-up-" + key, 0, time); // connected, and the script loaded
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            CountDownLatch go = new CountDownLatch(1);
            List<Future<Long>> runs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                runs.add(pool.submit(() -> {
                    go.await();
                    long admitted = 0;
                    for (int i = 0; i < attempts; i++) {
                        admitted += store.decide(rule, key, 1, time).allowed() ? 1 : 0;
                    }
                    return admitted;
                }));
            }
            System.out.println("ready");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            long first = System.currentTimeMillis();
            go.countDown();
            long admitted = 0;
            for (Future<Long> run : runs) {
                admitted += run.get();
            }
            long last = System.currentTimeMillis();
            pool.shutdown();
            RedisStore.Counts counts = store.counts();
            if (counts.failures() + counts.shortCircuited() > 0) {
                System.out.println("failures " + counts);
                System.exit(1);
            }
            System.out.println("result " + admitted + " " + first + " " + last); // found by its word: see the test
        }
    }
}
