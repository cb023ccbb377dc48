package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.store.InMemoryStore;
import io.github.bucket4j.Bucket;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * 1,000,000 keys drawn at random, 100 per second each: Sluice's in-memory store against Bucket4j buckets in a
 * {@link ConcurrentHashMap} (the way Bucket4j's documentation keys local buckets). The key strings are made
 * once, so the benchmark measures the map and the decision, not string building.
 *
 * <pre>java -jar bench/target/benchmarks.jar ManyKeysBenchmark -t 1</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(value = 1, jvmArgsAppend = {"-Xms4g", "-Xmx4g"})
public class ManyKeysBenchmark {
    static final int KEYS = 1_000_000;

    private String[] keys;
    private RateLimiter sluice;
    private ConcurrentHashMap<String, Bucket> bucket4j;

    @Setup
    public void setUp() {
        keys = new String[KEYS];
        for (int i = 0; i < KEYS; i++) {
            keys[i] = "user-" + i;
        }
        sluice = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("100/1s")
                .store(InMemoryStore.builder().maxKeys(2L * KEYS).build()).build();
        bucket4j = new ConcurrentHashMap<>();
    }

    private String anyKey() {
        return keys[ThreadLocalRandom.current().nextInt(KEYS)];
    }

    @Benchmark
    public boolean sluice() {
        return sluice.tryAcquire(anyKey()).allowed();
    }

    @Benchmark
    public boolean bucket4jInConcurrentHashMap() {
        return bucket4j.computeIfAbsent(anyKey(), k -> Bucket.builder()
                .addLimit(limit -> limit.capacity(100).refillGreedy(100, Duration.ofSeconds(1))).build())
                .tryConsume(1);
    }
}
