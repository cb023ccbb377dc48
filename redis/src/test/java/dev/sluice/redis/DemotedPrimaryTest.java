package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A primary demoted to a replica in place answers a script's write with {@code READONLY}: the store connects again,
 * so that an address that names the primary (a DNS name a failover moves) is looked up again. A review found the
 * connection never left, every decision failing for as long as the run lasted.
 */
class DemotedPrimaryTest {
    @Test
    void aReadonlyAnswerMakesTheConnectionAgain() throws Exception {
        try (RedisServer redis = RedisServer.start(); RedisServer other = RedisServer.start();
             Resp admin = redis.connect();
             RedisStore store = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(10))
                     .breaker(1_000, Duration.ofMillis(1)).build()) {
            RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1h").store(store).build();
            assertThat(limiter.tryAcquire("a").allowed()).isTrue();
            assertThat(limiter.tryAcquire("a").allowed()).as("decided by Redis").isFalse();
            long connections = connectionsReceived(admin);

            admin.call("REPLICAOF", "127.0.0.1", Integer.toString(other.port()));
            assertThat(limiter.tryAcquire("b").allowed()).as("failing open").isTrue();
            assertThat(store.counts().failedOpen()).isEqualTo(1);
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (connectionsReceived(admin) == connections && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(connectionsReceived(admin)).as("connected again").isGreaterThan(connections);

            admin.call("REPLICAOF", "NO", "ONE");
            deadline = System.nanoTime() + 5_000_000_000L;
            boolean deciding = false;
            while (!deciding && System.nanoTime() < deadline) {
                deciding = !limiter.tryAcquire("a").allowed(); // "a" is used up on Redis: a rejection is Redis's
                Thread.sleep(10);
            }
            assertThat(deciding).as("decided by Redis again").isTrue();
        }
    }

    private static long connectionsReceived(Resp admin) throws Exception {
        String info = (String) admin.call("INFO", "stats");
        return info.lines().filter(line -> line.startsWith("total_connections_received:"))
                .mapToLong(line -> Long.parseLong(line.substring(line.indexOf(':') + 1).trim())).findFirst().orElseThrow();
    }
}
