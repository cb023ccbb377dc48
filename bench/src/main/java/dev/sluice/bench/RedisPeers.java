package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.redis.RedisStore;
import dev.sluice.testkit.redis.RedisServer;
import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.proxy.ProxyManager;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * What the Redis benchmarks measure, set up once for a run: a loopback redis-server the benchmark starts, 1,000
 * keys at {@value #RATE} decisions a second each, and on it Sluice's Redis store (batched, and with each decision a
 * call of its own: {@code batch(1)}), Bucket4j's Lettuce proxy manager, and Redisson's {@code RRateLimiter}, each
 * with connections of its own, each as its documentation sets it up (Bucket4j's keys expire once full again).
 *
 * <p>The rate is one no library reaches (the fastest makes a few hundred decisions a second a key), so every
 * decision admits, and every library does the same work: a review found that at 100 a second, below which the peers
 * stayed, Sluice at 64 callers rejected most of its decisions, which cost Redis less (a read, no write) and, once
 * remembered, no call at all. A rejection, or a store failure, ends the run with an error rather than a figure.
 */
@State(Scope.Benchmark)
public class RedisPeers {
    static final int KEYS = 1_000;
    static final int RATE = 10_000;

    RedisServer redis;
    RedisStore store;
    RateLimiter sluice;
    RedisStore unbatchedStore;
    RateLimiter sluiceUnbatched;
    RedisClient lettuce;
    ProxyManager<byte[]> bucket4j;
    BucketConfiguration bucket4jConfiguration;
    RedissonClient redisson;
    RRateLimiter[] redissonLimiters;
    String[] keys;
    byte[][] keyBytes;
    /** Decisions that did not admit, which the rate above makes a fault of the set-up: see the class comment. */
    final java.util.concurrent.atomic.LongAdder rejected = new java.util.concurrent.atomic.LongAdder();

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
        sluice = RateLimiter.builder().algorithm(Algorithm.GCRA).limit(RATE + "/1s").store(store).build();
        unbatchedStore = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(2)).batch(1).build();
        sluiceUnbatched = RateLimiter.builder().algorithm(Algorithm.GCRA).limit(RATE + "/1s").store(unbatchedStore)
                .build();
        lettuce = RedisClient.create(redis.uri());
        // the expiry Bucket4j's documentation asks for: a key lives until its bucket is full again, plus ten seconds
        bucket4j = Bucket4jLettuce.casBasedBuilder(lettuce).expirationAfterWrite(
                io.github.bucket4j.distributed.ExpirationAfterWriteStrategy.basedOnTimeForRefillingBucketUpToMax(
                        Duration.ofSeconds(10))).build();
        bucket4jConfiguration = BucketConfiguration.builder()
                .addLimit(limit -> limit.capacity(RATE).refillGreedy(RATE, Duration.ofSeconds(1))).build();
        Config config = new Config();
        config.useSingleServer().setAddress(redis.uri()).setConnectionPoolSize(64).setConnectionMinimumIdleSize(8);
        redisson = Redisson.create(config);
        redissonLimiters = new RRateLimiter[KEYS];
        for (int i = 0; i < KEYS; i++) {
            redissonLimiters[i] = redisson.getRateLimiter("redisson:user-" + i);
            redissonLimiters[i].trySetRate(RateType.OVERALL, RATE, 1, RateIntervalUnit.SECONDS);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        RedisStore.Counts batched = store.counts();
        RedisStore.Counts alone = unbatchedStore.counts();
        boolean faulty = rejected.sum() > 0 || batched.failures() > 0 || alone.failures() > 0
                || batched.shortCircuited() > 0 || alone.shortCircuited() > 0;
        redisson.shutdown();
        lettuce.shutdown();
        store.close();
        unbatchedStore.close();
        redis.close();
        if (faulty) {
            throw new IllegalStateException("not the work measured: " + rejected.sum() + " decisions rejected, Sluice's"
                    + " store " + batched + ", unbatched " + alone);
        }
    }

    /** {@code allowed}, a rejection counted. */
    boolean counted(boolean allowed) {
        if (!allowed) {
            rejected.increment();
        }
        return allowed;
    }

    static int anyKey() {
        return ThreadLocalRandom.current().nextInt(KEYS);
    }
}
