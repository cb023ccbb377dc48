package dev.sluice.bench;

import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import static dev.sluice.bench.RedisPeers.anyKey;

/**
 * Decisions a second on a loopback Redis ({@link RedisPeers}) with callers that hold no thread while they wait,
 * as the requests on a server's event loop: one thread starts {@code callers} decisions through each library's
 * asynchronous API, waits for all of them, and starts the next round. Where {@link RedisBenchmark} has a thread
 * per caller, and on a small host pays a thread switch per decision whatever the library, this measures what the
 * library and Redis cost. The figure is the {@code decisions} counter, in decisions a second.
 *
 * <pre>java -jar bench/target/benchmarks.jar RedisAsyncBenchmark -p callers=16,64</pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 3, time = 3)
@Fork(1)
@Threads(1)
@State(Scope.Benchmark)
public class RedisAsyncBenchmark {
    @Param({"16", "64"})
    public int callers;

    /** Decisions made, counted by JMH as operations: a round of {@code callers} is that many. */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Decisions {
        public long decisions;

        @Setup(Level.Iteration)
        public void clear() {
            decisions = 0;
        }
    }

    @Benchmark
    public void sluice(RedisPeers peers, Decisions made) {
        round(peers, made, () -> peers.sluice.tryAcquireAsync(peers.keys[anyKey()]).toCompletableFuture());
    }

    @Benchmark
    public void sluiceUnbatched(RedisPeers peers, Decisions made) {
        round(peers, made, () -> peers.sluiceUnbatched.tryAcquireAsync(peers.keys[anyKey()]).toCompletableFuture());
    }

    @Benchmark
    public void bucket4jLettuce(RedisPeers peers, Decisions made) {
        round(peers, made, () -> peers.bucket4j.asAsync().builder()
                .build(peers.keyBytes[anyKey()], () -> CompletableFuture.completedFuture(peers.bucket4jConfiguration))
                .tryConsume(1));
    }

    @Benchmark
    public void redisson(RedisPeers peers, Decisions made) {
        round(peers, made, () -> peers.redissonLimiters[anyKey()].tryAcquireAsync().toCompletableFuture());
    }

    /** Starts {@link #callers} decisions, waits for them all, and counts them. */
    private void round(RedisPeers peers, Decisions made, Supplier<CompletableFuture<?>> decision) {
        CompletableFuture<?>[] round = new CompletableFuture<?>[callers];
        for (int i = 0; i < callers; i++) {
            round[i] = decision.get();
        }
        CompletableFuture.allOf(round).join();
        for (CompletableFuture<?> one : round) { // after the round, outside what a caller waits for
            Object answer = one.join();
            peers.counted(answer instanceof dev.sluice.Decision d ? d.allowed() : (Boolean) answer);
        }
        made.decisions += callers;
    }
}
