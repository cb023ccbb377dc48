package dev.sluice.server.metrics;

import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The room of the in-memory stores, by pool: {@code sluice_store_keys{pool}}, {@code sluice_store_max_keys{pool}},
 * {@code sluice_store_evicted_total{pool}} and {@code sluice_store_turned_away_total{pool}}. The pool {@code shared} is
 * the store every policy decides on unless it has one of its own (its keys and room NaN on Redis, its counts 0); a
 * policy with a {@code max_keys} of its own has a pool named after it, as nginx gives each zone its memory.
 *
 * <p>A reload may replace a pool's store (a change of its {@code max_keys}): what the old one evicted and turned away
 * stays in the counts, which never go back. A pool whose policy is gone keeps its counts, and its two gauges leave:
 * they would read NaN for good.
 */
final class RoomMeters {
    static final String SHARED = dev.sluice.server.config.ConfigLoader.SHARED_POOL;

    private final MeterRegistry registry;
    /** Takes a meter out of the registry, and out of the application's under it. */
    private final Consumer<Meter> remove;
    /** The store of each pool now. Guarded by this. */
    private final Map<String, Store> stores = new HashMap<>();
    /** What the stores a reload replaced had turned away and evicted, by pool. Guarded by this. */
    private final Map<String, long[]> retired = new HashMap<>();
    /** The two gauges of each pool in use, to remove once it is gone. Guarded by this. */
    private final Map<String, List<Meter>> gauges = new HashMap<>();

    RoomMeters(MeterRegistry registry, Consumer<Meter> remove) {
        this.registry = registry;
        this.remove = remove;
    }

    /** The shared pool is now {@code store}, an in-memory store or not. */
    void shared(Store store) {
        boolean added;
        synchronized (this) {
            added = replace(SHARED, store);
        }
        if (added) {
            register(SHARED);
        }
    }

    /** The policies' own pools are now {@code own}, by policy name; those not in it are gone. */
    void own(Map<String, InMemoryStore> own) {
        List<String> added = new ArrayList<>();
        List<Meter> removed = new ArrayList<>();
        synchronized (this) {
            for (String pool : List.copyOf(stores.keySet())) {
                if (!pool.equals(SHARED) && !own.containsKey(pool)) {
                    retire(pool, stores.remove(pool));
                    removed.addAll(gauges.remove(pool));
                }
            }
            own.forEach((pool, store) -> {
                if (replace(pool, store)) {
                    added.add(pool);
                }
            });
        }
        // outside the lock, which a scrape's reading of these meters takes: never one lock inside the other
        removed.forEach(remove);
        added.forEach(this::register);
    }

    /** Makes {@code store} the pool's, the counts of the one it replaces kept; whether the pool is new. Under the lock. */
    private boolean replace(String pool, Store store) {
        Store old = stores.put(pool, store);
        if (old != null && old != store) {
            retire(pool, old);
        }
        if (old == null) {
            gauges.put(pool, new ArrayList<>());
        }
        return old == null;
    }

    private void retire(String pool, Store old) {
        if (old instanceof InMemoryStore memory) {
            long[] sums = retired.computeIfAbsent(pool, p -> new long[2]);
            sums[0] += memory.turnedAway();
            sums[1] += memory.evicted();
        }
    }

    private void register(String pool) {
        List<Meter> its = List.of(
                Gauge.builder("sluice.store.keys", this, room -> room.read(pool, InMemoryStore::size))
                        .tag("pool", pool).description("Keys the in-memory store holds; NaN on Redis")
                        .register(registry),
                Gauge.builder("sluice.store.max.keys", this, room -> room.read(pool, InMemoryStore::maxKeys))
                        .tag("pool", pool).description("Keys the in-memory store may hold; NaN on Redis")
                        .register(registry));
        // the counters stay once the pool is gone (and are found again, the same, if it comes back)
        FunctionCounter.builder("sluice.store.turned.away", this, room -> room.total(pool, 0))
                .tag("pool", pool).description("Decisions on a new key the in-memory store had no room for, rejected"
                        + " or admitted without being stored (a store built so; the server's evicts)")
                .register(registry);
        FunctionCounter.builder("sluice.store.evicted", this, room -> room.total(pool, 1))
                .tag("pool", pool).description("Keys the full in-memory store evicted, the least recently decided,"
                        + " to make room for new ones; each lost its state").register(registry);
        synchronized (this) {
            List<Meter> list = gauges.get(pool);
            if (list != null) {
                list.addAll(its);
                return;
            }
        }
        its.forEach(remove); // gone meanwhile
    }

    private synchronized double read(String pool, java.util.function.ToLongFunction<InMemoryStore> what) {
        return stores.get(pool) instanceof InMemoryStore memory ? what.applyAsLong(memory) : Double.NaN;
    }

    /** What the pool's stores, the current one and those replaced, turned away (0) or evicted (1). */
    private synchronized double total(String pool, int which) {
        long[] sums = retired.get(pool);
        long sum = sums == null ? 0 : sums[which];
        if (stores.get(pool) instanceof InMemoryStore memory) {
            sum += which == 0 ? memory.turnedAway() : memory.evicted();
        }
        return sum;
    }
}
