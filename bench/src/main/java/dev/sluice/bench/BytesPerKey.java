package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.store.InMemoryStore;
import io.github.bucket4j.Bucket;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntConsumer;

/**
 * Retained heap per key at 1,000,000 keys, key strings included, for Sluice's in-memory store (one limit of
 * each algorithm) and for Bucket4j buckets in a {@link ConcurrentHashMap}, in the same run. Each holder is
 * filled, the heap measured after full collections, and the holder dropped before the next.
 *
 * <pre>java -Xmx4g -cp bench/target/benchmarks.jar dev.sluice.bench.BytesPerKey</pre>
 */
public final class BytesPerKey {
    private static final int KEYS = 1_000_000;

    private BytesPerKey() {
    }

    public static void main(String[] args) throws Exception {
        System.out.printf("%-36s %12s%n", "holder (1,000,000 keys, one request each)", "bytes/key");
        for (Algorithm algorithm : Algorithm.values()) {
            measure("sluice " + algorithm.label() + " 100/1h", () -> {
                RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit("100/1h")
                        .store(InMemoryStore.builder().maxKeys(2L * KEYS).build()).build();
                return (IntConsumer) i -> limiter.tryAcquire("user-" + i);
            });
        }
        measure("bucket4j in a ConcurrentHashMap", () -> {
            ConcurrentHashMap<String, Bucket> buckets = new ConcurrentHashMap<>();
            return (IntConsumer) i -> buckets.computeIfAbsent("user-" + i, k -> Bucket.builder()
                    .addLimit(limit -> limit.capacity(100).refillGreedy(100, Duration.ofHours(1))).build())
                    .tryConsume(1);
        });
    }

    /** Fills what {@code holder} makes with KEYS keys and prints the heap it retains per key. */
    private static void measure(String name, java.util.function.Supplier<IntConsumer> holder) throws Exception {
        long before = usedAfterGc();
        IntConsumer filler = holder.get();
        for (int i = 0; i < KEYS; i++) {
            filler.accept(i);
        }
        long after = usedAfterGc();
        System.out.printf(Locale.ROOT, "%-36s %12.1f%n", name, (after - before) / (double) KEYS);
        if (filler.hashCode() == 42) {
            System.out.print(""); // keeps the holder reachable until after the measurement
        }
    }

    private static long usedAfterGc() throws InterruptedException {
        for (int i = 0; i < 4; i++) {
            System.gc();
            Thread.sleep(100);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }
}
