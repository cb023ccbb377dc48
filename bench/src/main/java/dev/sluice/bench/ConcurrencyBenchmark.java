package dev.sluice.bench;

import dev.sluice.ConcurrencyLimiter;
import dev.sluice.Permit;
import io.github.resilience4j.bulkhead.Bulkhead;
import io.github.resilience4j.bulkhead.BulkheadConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A place taken and given back on one key that already holds {@code held} places of its limit, side by side with
 * Resilience4j's bulkhead (a semaphore: one limit, no keys, no leases). What it measures: the cost of a key with
 * many places, which was a copy of all its leases at each change (a millisecond a request at 50,000), now O(log n).
 *
 * <pre>java -jar bench/target/benchmarks.jar ConcurrencyBenchmark -t 1</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class ConcurrencyBenchmark {
    /** Places the key holds besides the one taken and given back. */
    @Param({"0", "1000", "50000"})
    public int held;

    private ConcurrencyLimiter sluice;
    private Bulkhead resilience4j;

    @Setup
    public void setUp() {
        sluice = ConcurrencyLimiter.builder().limit(held + 1).leaseTimeout(Duration.ofHours(1)).build();
        for (int i = 0; i < held; i++) {
            sluice.tryAcquire("the-key"); // held for the hour
        }
        resilience4j = Bulkhead.of("bench", BulkheadConfig.custom().maxConcurrentCalls(held + 1)
                .maxWaitDuration(Duration.ZERO).build());
        for (int i = 0; i < held; i++) {
            resilience4j.tryAcquirePermission();
        }
    }

    @Benchmark
    public boolean sluice() {
        try (Permit permit = sluice.tryAcquire("the-key")) {
            return permit.granted();
        }
    }

    @Benchmark
    public boolean resilience4j() {
        boolean granted = resilience4j.tryAcquirePermission();
        if (granted) {
            resilience4j.onComplete();
        }
        return granted;
    }
}
