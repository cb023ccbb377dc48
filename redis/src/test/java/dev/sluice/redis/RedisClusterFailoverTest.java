package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.RateLimiter;
import dev.sluice.testkit.redis.RedisCluster;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A Cluster master killed: its replica takes over, the store follows the new topology and keeps deciding. Once for
 * each script: fixed-window goes through {@code decide.lua}, a single gcra limit through {@code gcra.lua} (one key a
 * call on a Cluster).
 */
class RedisClusterFailoverTest {
    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"FIXED_WINDOW", "GCRA"})
    void keepsDecidingAfterAMasterFailsOver(Algorithm algorithm) throws Exception {
        try (RedisCluster cluster = RedisCluster.start(3, 1);
             RedisStore store = RedisStore.builder(cluster.uri()).timeout(Duration.ofMillis(200))
                     .breaker(3, Duration.ofMillis(200)).build()) {
            RateLimiter limiter = oneAnHour(algorithm, store);
            String key = "failover-key";
            // written through a store that never fails open, so a slow machine cannot leave the key untouched
            try (RedisStore exacting = SharedRedis.exacting(cluster.uri())) {
                RateLimiter before = oneAnHour(algorithm, exacting);
                assertThat(before.tryAcquire(key).allowed()).isTrue();
                assertThat(before.tryAcquire(key, 0).remaining()).isZero();
            }
            RedisServer master = cluster.masterOf("sluice:{" + key + "}");
            List<String> sameMaster = new ArrayList<>();
            for (int i = 0; sameMaster.size() < 100; i++) {
                if (cluster.masterOf("sluice:{probe-" + i + "}") == master) {
                    sameMaster.add("probe-" + i);
                }
            }
            awaitReplicated(cluster, master, "sluice:{" + key + "}");
            String deadId;
            try (Resp resp = master.connect()) {
                deadId = String.valueOf(resp.call("CLUSTER", "MYID"));
            }
            master.kill();
            // decisions go on meanwhile (failing open), and come from the promoted replica once it serves the slots
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            boolean failedOver = false;
            // a probe key stays fresh while decisions fail open (they store nothing); once Redis decides again
            // its second request, or the first one the next time round, is rejected by the 1/1h limit
            long promoted = 0;
            long resumed = 0;
            for (int i = 0; System.nanoTime() < deadline; i++) {
                if (promoted == 0 && cluster.masterOf("sluice:{" + key + "}") != master) {
                    promoted = System.nanoTime(); // as the first live node sees it
                }
                String probe = sameMaster.get(i % sameMaster.size());
                long start = System.nanoTime();
                Decision first = limiter.tryAcquire(probe);
                Decision second = limiter.tryAcquire(probe);
                assertThat(System.nanoTime() - start).as("no decision hangs").isLessThan(TimeUnit.SECONDS.toNanos(5));
                if (!first.allowed() || !second.allowed()) {
                    failedOver = true;
                    resumed = System.nanoTime();
                    break;
                }
                Thread.sleep(200);
            }
            assertThat(failedOver).as(() -> "a replica took over the dead master's slots, and Redis decides again"
                    + " within 60 s; the store counted " + store.counts() + "; the cluster:" + cluster.describe())
                    .isTrue();
            assertThat(cluster.masterOf("sluice:{" + key + "}")).isNotSameAs(master);
            // a past bug: the store saw the promotion at its next periodic refresh of the topology, up to 5 s later
            // (a review measured 4.6 s; 2 runs of 6 here took 4.8 and 5.0 s, the others 0.2 to 0.4 s); each opening
            // of the dead master's breaker now asks at once, so within a wait of the breaker (200 ms here)
            assertThat(TimeUnit.NANOSECONDS.toMillis(resumed - Math.min(promoted, resumed)))
                    .as("ms from the promotion to Redis deciding again").isLessThan(2_000);
            // a past bug: the dead master's breaker, opened as it died, stayed open (nothing asks its id again),
            // and the store called itself unhealthy for good
            assertThat(store.counts().breakerOpenings()).as("the dead master's breaker opened").isPositive();
            assertThat(store.healthy()).as("healthy once the replica decides: %s", store.counts()).isTrue();
            assertThat(store.breakerNodeIds()).as("the dead master's breaker went with it").doesNotContain(deadId)
                    .isNotEmpty();
            // the replica had the key's state: the limit still holds after the failover (read through a store
            // that never fails open: the first run of this test on a loaded machine had the limiter's 200 ms
            // call time out right after the failover and answer as for an untouched key)
            try (RedisStore exacting = SharedRedis.exacting(cluster.uri())) {
                assertThat(oneAnHour(algorithm, exacting).tryAcquire(key, 0).remaining()).isZero();
            }
            assertThat(store.counts().failures()).isPositive();
        }
    }

    /**
     * A past bug: one breaker served every master. While one master hung and the others answered, their successes
     * kept it from opening, so each decision on the hung master's keys cost a timeout; and once it opened (three
     * failures in a row), it decided the other masters' keys by the policy too: here a second request an hour,
     * admitted. Each master now has its own.
     */
    @Test
    void aHangingMasterOpensItsOwnBreakerAndTheOthersKeepDeciding() throws Exception {
        try (RedisCluster cluster = RedisCluster.start(3);
             RedisStore store = RedisStore.builder(cluster.uri()).timeout(Duration.ofMillis(100))
                     .breaker(3, Duration.ofSeconds(5)).build()) {
            RateLimiter limiter = oneAnHour(Algorithm.FIXED_WINDOW, store);
            RedisServer hanging = cluster.masterOf("sluice:{hung-0}");
            String elsewhere = null;
            for (int i = 0; elsewhere == null; i++) {
                if (cluster.masterOf("sluice:{other-" + i + "}") != hanging) {
                    elsewhere = "other-" + i;
                }
            }
            // the key elsewhere is used once, through Redis (and the store learns the topology)
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (limiter.tryAcquire(elsewhere, 0).remaining() != 0) {
                limiter.tryAcquire(elsewhere);
                assertThat(System.nanoTime()).as("Redis decides within 20 s").isLessThan(deadline);
            }
            RedisStore.Counts warm = store.counts(); // a cold Cluster's first calls may outlast the 100 ms timeout
            CompletableFuture<Object> sleeping = hanging.sleep("1.9"); // under the Cluster's node timeout of 2 s: no failover
            RedisFailureTest.awaitHanging(hanging);
            for (int i = 0; i < 3; i++) {
                long start = System.nanoTime();
                assertThat(limiter.tryAcquire("hung-0").allowed()).as("failing open").isTrue();
                // the first is also the first command to that node: a past bug waited out the connection's
                // handshake (up to 2 s) instead of the timeout
                assertThat(System.nanoTime() - start).as("a timeout, not the hang").isLessThan(TimeUnit.MILLISECONDS.toNanos(1000));
            }
            assertThat(store.counts().breakerOpenings() - warm.breakerOpenings()).as("the hung master's breaker opened: %s",
                    store.counts()).isEqualTo(1);
            long start = System.nanoTime();
            limiter.tryAcquire("hung-0");
            assertThat(System.nanoTime() - start).as("short-circuited, not a timeout").isLessThan(TimeUnit.MILLISECONDS.toNanos(100));
            assertThat(store.counts().shortCircuited() - warm.shortCircuited()).isEqualTo(1);
            assertThat(limiter.tryAcquire(elsewhere).allowed()).as("decided by its own master: used up").isFalse();
            assertThat(store.counts().shortCircuited() - warm.shortCircuited()).as("the other master was asked")
                    .isEqualTo(1);
            assertThat(store.healthy()).isFalse();
            sleeping.get(10, TimeUnit.SECONDS);
        }
    }

    /** The limit of this test, on {@code store}: one request an hour. */
    private static RateLimiter oneAnHour(Algorithm algorithm, RedisStore store) {
        return RateLimiter.builder().algorithm(algorithm).limit("1/1h").store(store).build();
    }

    /** Waits until the key's write has reached the master's replica (replication is asynchronous). */
    private static void awaitReplicated(RedisCluster cluster, RedisServer master, String redisKey) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (RedisServer node : cluster.nodes()) {
            try (Resp resp = node.connect()) {
                List<?> role = (List<?>) resp.call("ROLE");
                if (!"slave".equals(role.get(0)) || ((Long) role.get(2)) != master.port()) {
                    continue;
                }
                resp.call("READONLY");
                while (!Long.valueOf(1).equals(resp.call("EXISTS", redisKey))) {
                    assertThat(System.nanoTime()).as("replicated within 10 s").isLessThan(deadline);
                    Thread.sleep(20);
                }
                return;
            }
        }
        throw new AssertionError("the master on port " + master.port() + " has no replica");
    }
}
