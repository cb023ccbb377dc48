package dev.sluice.testkit.redis;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The Redis fixtures start real processes, survive a crash and a restart, and form a working cluster. */
class RedisFixtureTest {
    @Test
    void aStandaloneServerAnswersDiesAndComesBackEmptyOnTheSamePort() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            try (Resp resp = redis.connect()) {
                assertThat(resp.call("SET", "k", "v")).isEqualTo("OK");
                assertThat(resp.call("GET", "k")).isEqualTo("v");
                assertThat(resp.call("INCRBY", "n", "5")).isEqualTo(5L);
                assertThatThrownBy(() -> resp.call("NOSUCHCOMMAND")).isInstanceOf(Resp.RespError.class)
                        .hasMessageContaining("unknown command");
                List<?> time = (List<?>) resp.call("TIME");
                assertThat(Long.parseLong((String) time.get(0))).isGreaterThan(1_700_000_000L);
            }
            redis.kill();
            assertThat(redis.isAlive()).isFalse();
            assertThatThrownBy(redis::connect).isInstanceOf(IOException.class);
            redis.restart();
            try (Resp resp = redis.connect()) {
                assertThat(resp.call("GET", "k")).as("nothing is persisted").isNull();
            }
        }
    }

    @Test
    void threeMastersShareEverySlot() throws Exception {
        try (RedisCluster cluster = RedisCluster.start(3)) {
            assertThat(cluster.uri()).startsWith("redis-cluster://127.0.0.1:");
            try (Resp resp = cluster.nodes().get(0).connect()) {
                String info = (String) resp.call("CLUSTER", "INFO");
                assertThat(info).contains("cluster_state:ok", "cluster_slots_assigned:16384", "cluster_size:3");
                // a key of a slot this node does not serve is redirected
                long slot = (Long) resp.call("CLUSTER", "KEYSLOT", "sluice:{user-42}:0");
                assertThat(slot).isEqualTo((Long) resp.call("CLUSTER", "KEYSLOT", "sluice:{user-42}:1"));
            }
        }
    }
}
