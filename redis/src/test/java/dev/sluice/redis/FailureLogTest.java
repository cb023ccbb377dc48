package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.RateLimiter;
import dev.sluice.testkit.LogCapture;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Why decisions fail is logged once for each change of its kind, and once more when they succeed again. A review
 * found nothing logged while every decision failed open (a user without rights, a full Redis, a restart).
 */
class FailureLogTest {
    @Test
    void aFailureIsToldOnceByItsKindAndTheRecoveryOnce() throws Exception {
        try (RedisServer redis = RedisServer.start(); LogCapture log = LogCapture.of("dev.sluice.redis")) {
            try (Resp resp = redis.connect()) {
                resp.call("ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "-evalsha", "-eval");
            }
            String uri = "redis://limited:pw@127.0.0.1:" + redis.port();
            // a breaker that never opens, so that every decision goes to Redis and fails there
            // and a timeout no slow first call outlasts, which would be a failure of another kind, told apart
            try (RedisStore store = RedisStore.builder(uri).timeout(Duration.ofSeconds(10))
                    .breaker(1_000, Duration.ofMillis(1)).build()) {
                RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1/1h").store(store).build();
                for (int i = 0; i < 5; i++) {
                    assertThat(limiter.tryAcquire("k").allowed()).as("failing open").isTrue();
                }
                assertThat(store.counts().failedOpen()).isEqualTo(5);
                assertThat(log.messages()).hasSize(1);
                assertThat(log.messages().get(0)).startsWith("Redis store redis://limited:****@127.0.0.1:" + redis.port()
                        + ": decisions fail, decided by the failure policy (open): ").contains("NOPERM")
                        .endsWith("; told again when the failure changes, and when decisions succeed again");

                try (Resp resp = redis.connect()) {
                    resp.call("ACL", "SETUSER", "limited", "+evalsha", "+eval");
                }
                assertThat(limiter.tryAcquire("k").allowed()).isTrue();
                assertThat(limiter.tryAcquire("k").allowed()).as("decided by Redis again").isFalse();
                assertThat(log.messages()).hasSize(2);
                assertThat(log.messages().get(1)).isEqualTo("Redis store redis://limited:****@127.0.0.1:" + redis.port()
                        + ": decisions succeed again");
            }
        }
    }
}
