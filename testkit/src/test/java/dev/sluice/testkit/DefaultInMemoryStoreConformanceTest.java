package dev.sluice.testkit;

import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

/**
 * The whole contract on the in-memory store as a user gets it, {@code new InMemoryStore()}: no expired keys kept for
 * traces stamped back (see {@link InMemoryStoreConformanceTest}), at most a million keys. A review found the suite run
 * only on a store set for such traces.
 */
class DefaultInMemoryStoreConformanceTest extends StoreConformance {
    @Override
    protected Store newStore() {
        return new InMemoryStore();
    }
}
