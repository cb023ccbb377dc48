package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.Clock;
import dev.sluice.RateLimiter;
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

import java.util.concurrent.TimeUnit;

/**
 * One key's sliding log holding {@code entries} entries, every decision admitting: the limit is {@code entries}
 * per {@code entries} µs and the clock moves 1 µs at each reading, so that each decision's entry arrives as the
 * oldest expires and the log stays full. What a decision costs as the log grows: a log copied whole at each
 * admission costs time in proportion to its length.
 *
 * <pre>java -jar bench/target/benchmarks.jar SlidingLogBenchmark -t 1</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class SlidingLogBenchmark {
    @Param({"10", "1000", "10000"})
    public int entries;

    private RateLimiter sluice;

    @Setup
    public void setUp() {
        // one thread (-t 1): a plain counter is a clock that never runs backwards
        long[] now = {1_700_000_000_000_000_000L};
        Clock stepping = () -> now[0] += 1_000;
        sluice = RateLimiter.builder().algorithm(Algorithm.SLIDING_LOG).limit(entries + "/" + entries + "us")
                .clock(stepping).build();
    }

    @Benchmark
    public boolean sluice() {
        boolean allowed = sluice.tryAcquire("the-key").allowed();
        if (!allowed) {
            throw new IllegalStateException("a full log rejected: the clock or the limit is not as described");
        }
        return allowed;
    }
}
