package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisCluster;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.io.IOException;
import java.io.UncheckedIOException;

/** The whole contract on a real 3-master Redis Cluster. */
class RedisClusterConformanceTest extends StoreConformance {
    private static RedisCluster cluster;
    private static RedisStore store;

    @BeforeAll
    static void startCluster() throws IOException {
        cluster = RedisCluster.start(3);
        store = SharedRedis.exacting(cluster.uri());
    }

    @AfterAll
    static void stopCluster() throws Exception {
        store.close();
        cluster.close();
    }

    @Override
    protected Store newStore() {
        for (RedisServer node : cluster.nodes()) {
            try (Resp resp = node.connect()) {
                resp.call("FLUSHALL");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return store;
    }
}
