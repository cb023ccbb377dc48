package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.redis.RedisStore;
import dev.sluice.testkit.redis.RedisServer;
import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.proxy.ProxyManager;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Decisions a second on a loopback Redis (a redis-server the benchmark starts), 1,000 keys drawn at random,
 * 100 per second each: Sluice's Redis store, Bucket4j's Lettuce proxy manager, and Redisson's
 * {@code RRateLimiter}, each with its own connection, in the same run; and Sluice with each decision sent
 * alone ({@code batch(1)}), to see what sending together brings. The number of concurrent callers is
 * JMH's thread count.
 *
 * <pre>java -jar bench/target/benchmarks.jar RedisBenchmark -t 16</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class RedisBenchmark {
    static final int KEYS = 1_000;

    private RedisServer redis;
    private RedisStore store;
    private RateLimiter sluice;
    private RedisStore unbatchedStore;
    private RateLimiter sluiceUnbatched;
    private RedisClient lettuce;
    private ProxyManager<byte[]> bucket4j;
    private BucketConfiguration bucket4jConfiguration;
    private RedissonClient redisson;
    private RRateLimiter[] redissonLimiters;
    private String[] keys;
    private byte[][] keyBytes;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        redis = RedisServer.start();
        keys = new String[KEYS];
        keyBytes = new byte[KEYS][];
        for (int i = 0; i < KEYS; i++) {
            keys[i] = "user-" + i;
            keyBytes[i] = ("bucket4j:user-" + i).getBytes(StandardCharsets.UTF_8);
        }
        store = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(2)).build();
        sluice = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("100/1s").store(store).build();
        unbatchedStore = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(2)).batch(1).build();
        sluiceUnbatched = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("100/1s").store(unbatchedStore).build();
        lettuce = RedisClient.create(redis.uri());
        bucket4j = Bucket4jLettuce.casBasedBuilder(lettuce).build();
        bucket4jConfiguration = BucketConfiguration.builder()
                .addLimit(limit -> limit.capacity(100).refillGreedy(100, Duration.ofSeconds(1))).build();
        Config config = new Config();
        config.useSingleServer().setAddress(redis.uri()).setConnectionPoolSize(64).setConnectionMinimumIdleSize(8);
        redisson = Redisson.create(config);
        redissonLimiters = new RRateLimiter[KEYS];
        for (int i = 0; i < KEYS; i++) {
            redissonLimiters[i] = redisson.getRateLimiter("redisson:user-" + i);
            redissonLimiters[i].trySetRate(RateType.OVERALL, 100, 1, RateIntervalUnit.SECONDS);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        redisson.shutdown();
        lettuce.shutdown();
        store.close();
        unbatchedStore.close();
        redis.close();
    }

    private static int anyKey() {
        return ThreadLocalRandom.current().nextInt(KEYS);
    }

    @Benchmark
    public boolean sluice() {
        return sluice.tryAcquire(keys[anyKey()]).allowed();
    }

    /** Each decision a call of its own ({@code batch(1)}), as before decisions were sent together. */
    @Benchmark
    public boolean sluiceUnbatched() {
        return sluiceUnbatched.tryAcquire(keys[anyKey()]).allowed();
    }

    @Benchmark
    public boolean bucket4jLettuce() {
        return bucket4j.builder().build(keyBytes[anyKey()], () -> bucket4jConfiguration).tryConsume(1);
    }

    @Benchmark
    public boolean redisson() {
        return redissonLimiters[anyKey()].tryAcquire();
    }
}
