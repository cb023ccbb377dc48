package dev.sluice.bench;

import dev.sluice.Algorithm;
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
 * One key, each algorithm of the in-memory store: {@link OneKeyBenchmark} measures gcra (and the greedy token
 * bucket, which decides with it) against the peers; this measures the others, so that no algorithm's decision goes
 * unmeasured (a past note found the interval refill's never run); {@code OneKeyBenchmark.bucket4jInterval} is the
 * peer of its interval refill. {@code outcome=admitted} is a rate no thread can exhaust; {@code outcome=rejected} is 1
 * a second: after the first, every decision rejects. An admitting sliding log is 1,000,000 per 10 µs, so that its
 * log, an entry for each admission within its period, stays at tens of entries ({@link SlidingLogBenchmark} keeps
 * longer ones).
 *
 * <pre>java -jar bench/target/benchmarks.jar AlgorithmsBenchmark -t 1</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class AlgorithmsBenchmark {
    @Param({"fixed-window", "sliding-window", "sliding-log", "token-bucket-interval"})
    public String algorithm;

    @Param({"admitted", "rejected"})
    public String outcome;

    private RateLimiter sluice;

    @Setup
    public void setUp() {
        long rate = outcome.equals("rejected") ? 1 : 1_000_000_000L;
        RateLimiter.Builder builder = RateLimiter.builder();
        if (algorithm.equals("token-bucket-interval")) {
            builder.algorithm(Algorithm.TOKEN_BUCKET).limit(rate + "/1s refill=interval");
        } else if (algorithm.equals("sliding-log") && outcome.equals("admitted")) {
            // a log holds an entry for each admission within its period: over 10 µs, tens of entries
            builder.algorithm(Algorithm.SLIDING_LOG).limit("1000000/10us");
        } else {
            builder.algorithm(Algorithm.parse(algorithm)).limit(rate + "/1s");
        }
        sluice = builder.build();
    }

    @Benchmark
    public boolean sluice() {
        return sluice.tryAcquire("the-key").allowed();
    }
}
