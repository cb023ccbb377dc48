package dev.sluice.bench;

import dev.sluice.Clock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

/**
 * The floor under every decision: reading the time. Sluice reads {@link Clock#system()} (the monotonic
 * clock offset to the epoch) once per decision; Bucket4j's local buckets read {@code currentTimeMillis}.
 *
 * <pre>java -jar bench/target/benchmarks.jar ClockBenchmark</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class ClockBenchmark {
    private static final Clock SYSTEM = Clock.system();

    @Benchmark
    public long sluiceSystemClock() {
        return SYSTEM.nanos();
    }

    @Benchmark
    public long nanoTime() {
        return System.nanoTime();
    }

    @Benchmark
    public long currentTimeMillis() {
        return System.currentTimeMillis();
    }
}
