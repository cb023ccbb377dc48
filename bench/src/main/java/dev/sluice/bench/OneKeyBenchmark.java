package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import io.github.bucket4j.Bucket;
import io.github.resilience4j.ratelimiter.RateLimiterConfig;
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
 * One key, side by side with the peers, each configured as the same greedy token bucket: {@code rate} per
 * second with a burst of the same size. With a rate far above what one thread can ask for, nearly every
 * request is admitted; with a rate of 1 per second, nearly every request is rejected.
 *
 * <pre>java -jar bench/target/benchmarks.jar OneKeyBenchmark -t 1</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class OneKeyBenchmark {
    /** Requests per second the limit allows: "admitted" (10^9: more than a thread can ask for) or "rejected" (1). */
    @Param({"admitted", "rejected"})
    public String outcome;

    private RateLimiter sluice;
    private Bucket bucket4j;
    private Bucket bucket4jInterval;
    private com.google.common.util.concurrent.RateLimiter guava;
    private io.github.resilience4j.ratelimiter.RateLimiter resilience4j;

    @Setup
    public void setUp() {
        long rate = outcome.equals("admitted") ? 1_000_000_000L : 1;
        sluice = RateLimiter.builder().algorithm(Algorithm.GCRA).limit(rate + "/1s").build();
        bucket4j = Bucket.builder()
                .addLimit(limit -> limit.capacity(rate).refillGreedy(rate, Duration.ofSeconds(1))).build();
        bucket4jInterval = Bucket.builder()
                .addLimit(limit -> limit.capacity(rate).refillIntervally(rate, Duration.ofSeconds(1))).build();
        guava = com.google.common.util.concurrent.RateLimiter.create(rate);
        resilience4j = io.github.resilience4j.ratelimiter.RateLimiter.of("bench", RateLimiterConfig.custom()
                .limitForPeriod((int) Math.min(rate, Integer.MAX_VALUE)).limitRefreshPeriod(Duration.ofSeconds(1))
                .timeoutDuration(Duration.ZERO).build());
    }

    @Benchmark
    public boolean sluice() {
        return sluice.tryAcquire("the-key").allowed();
    }

    @Benchmark
    public boolean bucket4j() {
        return bucket4j.tryConsume(1);
    }

    /** Bucket4j asked for what a Sluice decision tells: the remaining tokens and the wait. */
    @Benchmark
    public long bucket4jVerbose() {
        return bucket4j.tryConsumeAndReturnRemaining(1).getRemainingTokens();
    }

    /** Bucket4j's interval refill: the peer of AlgorithmsBenchmark's token-bucket-interval. */
    @Benchmark
    public boolean bucket4jInterval() {
        return bucket4jInterval.tryConsume(1);
    }

    @Benchmark
    public boolean guava() {
        return guava.tryAcquire();
    }

    @Benchmark
    public boolean resilience4j() {
        return resilience4j.acquirePermission();
    }
}
