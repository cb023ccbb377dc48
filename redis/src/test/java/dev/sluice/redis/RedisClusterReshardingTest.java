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

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A key's slot moved from one master to another while the store decides it, as {@code redis-cli --cluster reshard}
 * moves it: the target set {@code IMPORTING}, the source {@code MIGRATING}, the key sent over with {@code MIGRATE},
 * and the slot given to the target. Meanwhile the source answers {@code ASK} for the key once it has left, and
 * {@code MOVED} once the slot is the target's; the target's scripts are flushed first (the store loads them on every
 * master as it opens), so its first call is also a {@code NOSCRIPT}. Every decision is still made by Redis, on the one state of the key, with nothing lost: each
 * one admits with exactly one less remaining than the one before. Once for each script.
 */
class RedisClusterReshardingTest {
    private static final int LIMIT = 1_000;

    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"FIXED_WINDOW", "GCRA"})
    void decidesExactlyWhileItsKeysSlotMoves(Algorithm algorithm) throws Exception {
        try (RedisCluster cluster = RedisCluster.start(3);
             RedisStore store = RedisStore.builder(cluster.uri()).timeout(Duration.ofSeconds(2)).raiseFailures(true)
                     .build()) {
            // a day: gcra refills one in 86 s, and a fixed window ends at midnight, past any run of this test
            RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit(LIMIT + "/1d").store(store).build();
            String key = "moving";
            String redisKey = RedisStore.redisKey(key);
            RedisServer source = cluster.masterOf(redisKey);
            RedisServer target = cluster.nodes().stream().filter(node -> node != source).findFirst().orElseThrow();
            String sourceId = id(source);
            String targetId = id(target);
            long slot;
            try (Resp resp = source.connect()) {
                slot = (Long) resp.call("CLUSTER", "KEYSLOT", redisKey);
            }
            Decisions decisions = new Decisions(limiter, key);

            decisions.expectAdmitted(10, "on the source");
            call(target, "CLUSTER", "SETSLOT", Long.toString(slot), "IMPORTING", sourceId);
            call(source, "CLUSTER", "SETSLOT", Long.toString(slot), "MIGRATING", targetId);
            decisions.expectAdmitted(10, "on the source, its slot migrating");
            call(target, "SCRIPT", "FLUSH");
            long reloads = store.counts().scriptReloads();
            call(source, "MIGRATE", "127.0.0.1", Integer.toString(target.port()), redisKey, "0", "5000");
            try (Resp resp = target.connect()) {
                resp.call("ASKING");
                assertThat(resp.call("EXISTS", redisKey)).as("the key is on the target").isEqualTo(1L);
            }
            decisions.expectAdmitted(10, "on the target, asked for (ASK)");
            assertThat(store.counts().scriptReloads()).as("the target, its scripts flushed, was sent the text")
                    .isGreaterThan(reloads);
            giveSlot(cluster, Long.toString(slot), source, target, targetId);
            decisions.expectAdmitted(10, "on the target, which owns the slot (MOVED)");

            assertThat(cluster.masterOf(redisKey)).isSameAs(target);
            try (Resp resp = source.connect()) {
                assertThat(resp.call("DBSIZE")).as("nothing of the key left on the source").isEqualTo(0L);
            }
            assertThat(store.counts().failures()).as("%s", store.counts()).isZero();
        }
    }

    /**
     * The same move while four threads decide the key as fast as they can: no decision fails, and the key's count
     * at the end is exactly the number admitted, so no decision was lost or counted twice as the key moved.
     * Fixed-window, whose count is exact however long the test takes (a day's window: a test crossing midnight
     * would see a new one, a chance of about one in 30,000).
     */
    @Test
    void losesNoDecisionOfManyThreadsWhileItsKeysSlotMoves() throws Exception {
        long limit = 1_000_000;
        try (RedisCluster cluster = RedisCluster.start(3);
             RedisStore store = RedisStore.builder(cluster.uri()).timeout(Duration.ofSeconds(2)).raiseFailures(true)
                     .build()) {
            RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit(limit + "/1d")
                    .store(store).build();
            String key = "moving-busy";
            String redisKey = RedisStore.redisKey(key);
            RedisServer source = cluster.masterOf(redisKey);
            RedisServer target = cluster.nodes().stream().filter(node -> node != source).findFirst().orElseThrow();
            String slot = String.valueOf(call(source, "CLUSTER", "KEYSLOT", redisKey));
            AtomicBoolean stop = new AtomicBoolean();
            LongAdder admitted = new LongAdder();
            ExecutorService threads = Executors.newFixedThreadPool(4);
            List<Future<?>> running = new ArrayList<>();
            try {
                for (int t = 0; t < 4; t++) {
                    running.add(threads.submit(() -> {
                        while (!stop.get()) {
                            Decision decision = limiter.tryAcquire(key);
                            assertThat(decision.allowed()).isTrue();
                            admitted.increment();
                        }
                        return null;
                    }));
                }
                Thread.sleep(300);
                call(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(source));
                call(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(target));
                Thread.sleep(300);
                call(source, "MIGRATE", "127.0.0.1", Integer.toString(target.port()), redisKey, "0", "5000");
                Thread.sleep(300);
                giveSlot(cluster, slot, source, target, id(target));
                Thread.sleep(300);
            } finally {
                stop.set(true);
                threads.shutdown();
            }
            for (Future<?> thread : running) {
                thread.get(10, TimeUnit.SECONDS); // a failure of Redis throws here
            }
            assertThat(cluster.masterOf(redisKey)).isSameAs(target);
            assertThat(admitted.sum()).as("decisions made").isGreaterThan(100);
            assertThat(limiter.tryAcquire(key, 0).remaining()).as("the count left on the target")
                    .isEqualTo(limit - admitted.sum());
            assertThat(store.counts().failures()).as("%s", store.counts()).isZero();
        }
    }

    /** One decision after another on one key, each expected to admit with one less remaining. */
    private static final class Decisions {
        private final RateLimiter limiter;
        private final String key;
        private long made;

        Decisions(RateLimiter limiter, String key) {
            this.limiter = limiter;
            this.key = key;
        }

        void expectAdmitted(int count, String where) {
            for (int i = 0; i < count; i++) {
                Decision decision = limiter.tryAcquire(key);
                made++;
                assertThat(decision.allowed()).as("decision %d, %s", made, where).isTrue();
                assertThat(decision.remaining()).as("decision %d, %s", made, where).isEqualTo(LIMIT - made);
            }
        }
    }

    /**
     * Gives {@code slot} to {@code target}, as redis-cli does: the target first, then the source, then the others. The
     * source first, with the target still importing, would send the slot's keys back and forth between them.
     */
    private static void giveSlot(RedisCluster cluster, String slot, RedisServer source, RedisServer target,
                                 String targetId) throws IOException {
        call(target, "CLUSTER", "SETSLOT", slot, "NODE", targetId);
        call(source, "CLUSTER", "SETSLOT", slot, "NODE", targetId);
        for (RedisServer node : cluster.nodes()) {
            if (node != source && node != target) {
                call(node, "CLUSTER", "SETSLOT", slot, "NODE", targetId);
            }
        }
    }

    private static String id(RedisServer node) throws IOException {
        return (String) call(node, "CLUSTER", "MYID");
    }

    private static Object call(RedisServer node, String... command) throws IOException {
        try (Resp resp = node.connect()) {
            return resp.call(command);
        }
    }
}
