package dev.sluice.bench;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

import static dev.sluice.bench.RedisPeers.anyKey;

/**
 * Decisions a second on a loopback Redis ({@link RedisPeers}), each caller a thread that waits for its answer:
 * the number of concurrent callers is JMH's thread count. {@link RedisAsyncBenchmark} has callers that do not
 * hold a thread while they wait.
 *
 * <pre>java -jar bench/target/benchmarks.jar RedisBenchmark -t 16</pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class RedisBenchmark {
    @Benchmark
    public boolean sluice(RedisPeers peers) {
        return peers.counted(peers.sluice.tryAcquire(peers.keys[anyKey()]).allowed());
    }

    /** Each decision a call of its own ({@code batch(1)}), as before decisions were sent together. */
    @Benchmark
    public boolean sluiceUnbatched(RedisPeers peers) {
        return peers.counted(peers.sluiceUnbatched.tryAcquire(peers.keys[anyKey()]).allowed());
    }

    @Benchmark
    public boolean bucket4jLettuce(RedisPeers peers) {
        return peers.counted(peers.bucket4j.builder().build(peers.keyBytes[anyKey()], () -> peers.bucket4jConfiguration)
                .tryConsume(1));
    }

    @Benchmark
    public boolean redisson(RedisPeers peers) {
        return peers.counted(peers.redissonLimiters[anyKey()].tryAcquire());
    }
}
