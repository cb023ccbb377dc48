package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The in-memory store's table under races that only many keys bring: inserts that grow it while other
 * threads decide, and sweeps that remove expired keys while threads decide on them. No decision may be lost
 * and no key may be stored twice, so the admitted counts are exact.
 */
class KeyTableConcurrencyTest {
    private static final long S = 1_000_000_000L;
    private static final long T0 = 1_700_000_000L * S;
    private static final int THREADS = 8;

    private static List<String> shuffled(List<String> keys, long seed) {
        List<String> order = new ArrayList<>(keys);
        Collections.shuffle(order, new Random(seed));
        return order;
    }

    private static List<String> keys(int count) {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            keys.add(i % 7 == 0 ? "ключ-" + i : "user-" + i); // some keys are not Latin-1
        }
        return keys;
    }

    /**
     * Keys that share one hash (see {@code KeyTableCollisionTest}) make the table copy itself into one hashed
     * with a secret while the threads insert and decide; nothing may be lost through that copy either.
     */
    @ParameterizedTest(name = "keys sharing a hash: {0}")
    @ValueSource(booleans = {false, true})
    void growingWhileEightThreadsInsertAndDecideLosesNothing(boolean colliding) throws Exception {
        InMemoryStore store = new InMemoryStore();
        Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("3/1h")));
        List<String> keys = keys(colliding ? 20_000 : 50_000);
        if (colliding) {
            keys.addAll(KeyTableCollisionTest.sharingOneHash(12)); // 4,096
        }
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        List<Future<Long>> runs = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            long seed = t;
            runs.add(pool.submit(() -> {
                long admitted = 0;
                for (int pass = 0; pass < 4; pass++) {
                    for (String key : shuffled(keys, seed * 10 + pass)) {
                        admitted += store.decide(rule, key, 1, T0).allowed() ? 1 : 0;
                    }
                }
                return admitted;
            }));
        }
        long admitted = 0;
        for (Future<Long> run : runs) {
            admitted += run.get(2, TimeUnit.MINUTES);
        }
        pool.shutdown();
        assertThat(admitted).isEqualTo(3L * keys.size());
        assertThat(store.size()).isEqualTo(keys.size());
        for (String key : keys) {
            assertThat(store.decide(rule, key, 0, T0).remaining()).as(key).isZero();
        }
    }

    @Test
    void sweepingExpiredKeysWhileThreadsDecideOnThemLosesNothing() throws Exception {
        InMemoryStore store = new InMemoryStore();
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("3/1s")));
        List<String> keys = keys(2_000);
        int phases = 20;
        AtomicLong now = new AtomicLong(T0);
        AtomicBoolean done = new AtomicBoolean();
        // every phase starts 10 s after the one before: each key's state from the last phase has expired, and
        // the sweeper removes such states while the deciders decide on the same keys
        CyclicBarrier nextPhase = new CyclicBarrier(THREADS, () -> now.addAndGet(10 * S));
        ExecutorService pool = Executors.newFixedThreadPool(THREADS + 1);
        Future<Long> sweeper = pool.submit(() -> {
            long sweeps = 0;
            while (!done.get()) {
                store.cleanUp(now.get());
                sweeps++;
            }
            return sweeps;
        });
        List<Future<Long>> runs = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            long seed = t;
            runs.add(pool.submit(() -> {
                long admitted = 0;
                for (int phase = 0; phase < phases; phase++) {
                    long at = now.get();
                    for (int pass = 0; pass < 4; pass++) {
                        for (String key : shuffled(keys, seed * 1000 + phase * 10 + pass)) {
                            admitted += store.decide(rule, key, 1, at).allowed() ? 1 : 0;
                        }
                    }
                    nextPhase.await();
                }
                return admitted;
            }));
        }
        long admitted = 0;
        for (Future<Long> run : runs) {
            admitted += run.get(2, TimeUnit.MINUTES);
        }
        done.set(true);
        assertThat(sweeper.get(1, TimeUnit.MINUTES)).isPositive();
        pool.shutdown();
        assertThat(admitted).isEqualTo(3L * keys.size() * phases);
        store.cleanUp(now.get());
        assertThat(store.size()).isZero();
    }
}
