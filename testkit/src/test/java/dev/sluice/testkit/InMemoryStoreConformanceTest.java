package dev.sluice.testkit;

import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

/** The whole contract on the in-memory store. */
class InMemoryStoreConformanceTest extends StoreConformance {
    @Override
    protected Store newStore() {
        return new InMemoryStore();
    }
}
