package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The table's earliest expiry is a bound no stored key expires before: a store that rejects or admits new keys
 * when full sweeps only once it has passed, and tells a rejected new key to come back then. Two past bugs a review
 * found, each where a key's expiry went unnoted, so that such a store took itself for full after the key had
 * expired: a decider that set a new key's first state before its inserter could, and a key put in behind a sweep.
 */
class KeyTableFirstExpiryTest {
    private static final long T0 = 1_700_000_000L * 1_000_000_000L;
    private static final long S = 1_000_000_000L;
    private static final Rule ONE_IN_TEN_SECONDS = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/10s")));
    private static final Rule ONE_AN_HOUR = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/1h")));

    @Test
    void aNewKeysFirstStateSetByAnotherDeciderIsNoted() throws Exception {
        KeyTable table = new KeyTable(1_000);
        CountDownLatch claimed = new CountDownLatch(1);
        CountDownLatch decided = new CountDownLatch(1);
        table.afterClaim = () -> {
            claimed.countDown();
            await(decided);
        };
        CompletableFuture<Boolean> inserter = CompletableFuture.supplyAsync(
                () -> table.decide(ONE_IN_TEN_SECONDS, "a", 1, null, T0, 0).allowed());
        await(claimed);
        table.afterClaim = null;
        boolean first = table.decide(ONE_IN_TEN_SECONDS, "a", 1, null, T0, 0).allowed(); // sets a's first state
        decided.countDown();
        assertThat(first).isTrue();
        assertThat(inserter.get(10, TimeUnit.SECONDS)).as("one of the two admitted").isFalse();
        assertThat(table.firstExpiry()).isEqualTo(T0 + 10 * S);
    }

    @Test
    void aKeyPutInBehindASweepIsNoted() throws Exception {
        KeyTable table = new KeyTable(1_000);
        assertThat(table.decide(ONE_AN_HOUR, "late", 1, null, T0, 0).allowed()).isTrue();
        CountDownLatch looked = new CountDownLatch(1);
        CountDownLatch inserted = new CountDownLatch(1);
        table.afterSweepLooked = () -> {
            looked.countDown();
            await(inserted);
        };
        CompletableFuture<Void> sweep = CompletableFuture.runAsync(() -> table.cleanUp(T0));
        await(looked);
        table.afterSweepLooked = null;
        assertThat(table.decide(ONE_IN_TEN_SECONDS, "early", 1, null, T0, 0).allowed()).isTrue();
        inserted.countDown();
        sweep.get(10, TimeUnit.SECONDS);
        assertThat(table.firstExpiry()).as("early's, not late's").isEqualTo(T0 + 10 * S);
    }

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(10, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
