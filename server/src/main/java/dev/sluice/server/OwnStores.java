package dev.sluice.server;

import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.store.InMemoryStore;

import java.util.HashMap;
import java.util.Map;

/**
 * The in-memory stores of the policies that have one of their own ({@code max_keys} in a policy), by policy name.
 *
 * <p>Why: one store bounds the keys of every policy together, so a flood of new keys of one policy (a {@code /search}
 * limit keyed by the query) evicted the least recently decided keys of all, a login limit's among them, which then
 * started afresh. nginx gives each {@code limit_req_zone} memory of its own; a policy's {@code max_keys} does the same.
 *
 * <p>A reload keeps a policy's store while the policy keeps its name and its {@code max_keys}, so its counters go on
 * as the shared store's do; one whose {@code max_keys} changes starts afresh, as the shared store does when the
 * top-level {@code max_keys} changes.
 */
final class OwnStores {
    /** Guarded by this; replaced whole, never changed. */
    private Map<String, InMemoryStore> stores = Map.of();

    /** The stores of {@code config}'s policies that have a {@code max_keys}, those of the policies kept as they were. */
    synchronized Map<String, InMemoryStore> update(ServerConfig config) {
        Map<String, InMemoryStore> next = new HashMap<>();
        for (PolicyConfig policy : config.policies()) {
            if (policy.maxKeys() > 0) {
                InMemoryStore kept = stores.get(policy.name());
                next.put(policy.name(), kept != null && kept.maxKeys() == policy.maxKeys() ? kept
                        : InMemoryStore.builder().maxKeys(policy.maxKeys()).build());
            }
        }
        stores = Map.copyOf(next);
        return stores;
    }

    /** Drops the expired keys of each store. */
    void cleanUp() {
        Map<String, InMemoryStore> now;
        synchronized (this) {
            now = stores;
        }
        now.values().forEach(InMemoryStore::cleanUp);
    }
}
