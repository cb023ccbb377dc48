package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;

/** The whole contract on a real, standalone Redis. */
class RedisStoreConformanceTest extends StoreConformance {
    /** The same store, emptied: every test and every random trace starts from untouched keys. */
    @Override
    protected Store newStore() {
        SharedRedis.flush();
        return SharedRedis.store();
    }
}
