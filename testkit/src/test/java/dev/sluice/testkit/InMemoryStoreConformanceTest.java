package dev.sluice.testkit;

import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.time.Duration;

/**
 * The whole contract on the in-memory store, set for traces stamped back across keys (as the suite's random
 * traces are): it keeps expired keys an hour, as the Redis store does.
 */
class InMemoryStoreConformanceTest extends StoreConformance {
    @Override
    protected Store newStore() {
        return InMemoryStore.builder().outOfOrder(Duration.ofHours(1)).build();
    }
}
