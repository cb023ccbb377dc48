package dev.sluice.bench;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.redis.RedisStore;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * What one limited key costs in Redis ({@code MEMORY USAGE}, summed over every Redis key a limiter keeps for
 * it), after one request, for each Sluice algorithm and for Bucket4j and Redisson, on one redis-server.
 *
 * <pre>java -cp bench/target/benchmarks.jar dev.sluice.bench.RedisBytesPerKey</pre>
 */
public final class RedisBytesPerKey {
    private RedisBytesPerKey() {
    }

    public static void main(String[] args) throws Exception {
        try (RedisServer redis = RedisServer.start(); Resp resp = redis.connect();
             RedisStore store = RedisStore.connect(redis.uri())) {
            System.out.printf("%-40s %10s %6s%n", "limiter (100/1s, one request)", "bytes", "keys");
            for (Algorithm algorithm : Algorithm.values()) {
                RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit("100/1s").store(store).build();
                limiter.tryAcquire("user-42-" + algorithm.label());
                report(resp, "sluice " + algorithm.label(), "sluice:{user-42-" + algorithm.label() + "}*");
            }
            RedisClient lettuce = RedisClient.create(redis.uri());
            Bucket4jLettuce.casBasedBuilder(lettuce).build().builder()
                    .build("bucket4j:user-42".getBytes(StandardCharsets.UTF_8), () -> BucketConfiguration.builder()
                            .addLimit(limit -> limit.capacity(100).refillGreedy(100, Duration.ofSeconds(1))).build())
                    .tryConsume(1);
            report(resp, "bucket4j (Lettuce proxy)", "bucket4j:*");
            lettuce.shutdown();
            Config config = new Config();
            config.useSingleServer().setAddress(redis.uri());
            RedissonClient redisson = Redisson.create(config);
            RRateLimiter limiter = redisson.getRateLimiter("redisson-user-42");
            limiter.trySetRate(RateType.OVERALL, 100, 1, RateIntervalUnit.SECONDS);
            limiter.tryAcquire();
            report(resp, "redisson RRateLimiter", "*redisson-user-42*");
            redisson.shutdown();
        }
    }

    private static void report(Resp resp, String name, String pattern) throws Exception {
        List<?> keys = (List<?>) resp.call("KEYS", pattern);
        long bytes = 0;
        for (Object key : keys) {
            bytes += (Long) resp.call("MEMORY", "USAGE", (String) key, "SAMPLES", "0");
        }
        System.out.printf(Locale.ROOT, "%-40s %10d %6d%n", name, bytes, keys.size());
    }
}
