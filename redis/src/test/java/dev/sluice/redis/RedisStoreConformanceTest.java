package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.io.IOException;
import java.io.UncheckedIOException;

/** The whole contract on a real, standalone Redis. */
class RedisStoreConformanceTest extends StoreConformance {
    private static RedisServer redis;
    private static RedisStore store;

    @BeforeAll
    static void startRedis() throws IOException {
        redis = RedisServer.start();
        store = RedisStore.connect(redis.uri());
    }

    @AfterAll
    static void stopRedis() throws Exception {
        store.close();
        redis.close();
    }

    /** The same store, emptied: every test and every random trace starts from untouched keys. */
    @Override
    protected Store newStore() {
        try (Resp resp = redis.connect()) {
            resp.call("FLUSHALL");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return store;
    }
}
