package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A resize moves the table key by key, and no decider waits for the whole move. A past weakness: every
 * thread that met a moved slot waited until the last key was copied (90 ms at 1.5 million keys).
 */
class KeyTableResizeTest {
    private static final long T0 = 1_700_000_000L * 1_000_000_000L;
    private static final Rule THREE_AN_HOUR = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("3/1h")));
    private static final int OLD_KEYS = 100;

    @Test
    void decidersGoOnWhileAResizeIsPausedHalfWay() throws Exception {
        KeyTable table = new KeyTable(1_000_000);
        for (int i = 0; i < OLD_KEYS; i++) {
            assertThat(table.decide(THREE_AN_HOUR, "old-" + i, 1, T0, T0).remaining()).isEqualTo(2);
        }
        CountDownLatch paused = new CountDownLatch(1);
        CountDownLatch resume = new CountDownLatch(1);
        AtomicBoolean first = new AtomicBoolean(true);
        table.afterEachCopy = () -> {
            if (first.getAndSet(false)) {
                paused.countDown();
                await(resume);
            }
        };
        // new keys until one finds the table crowded: its thread resizes, and stops after the first key it moves
        CompletableFuture<Integer> resizer = CompletableFuture.supplyAsync(() -> {
            int inserted = 0;
            while (paused.getCount() > 0) {
                table.decide(THREE_AN_HOUR, "new-" + inserted++, 1, T0, T0);
            }
            return inserted;
        });
        assertThat(paused.await(30, TimeUnit.SECONDS)).as("a resize started").isTrue();

        // meanwhile: every old key (one of them moved already, the others not yet) and keys never seen
        CompletableFuture<Void> deciders = CompletableFuture.runAsync(() -> {
            for (int i = 0; i < OLD_KEYS; i++) {
                Decision second = table.decide(THREE_AN_HOUR, "old-" + i, 1, T0, T0);
                assertThat(second.allowed()).isTrue();
                assertThat(second.remaining()).as("old-" + i).isEqualTo(1);
            }
            for (int i = 0; i < 20; i++) {
                assertThat(table.decide(THREE_AN_HOUR, "during-" + i, 1, T0, T0).remaining()).isEqualTo(2);
            }
        });
        try {
            deciders.get(30, TimeUnit.SECONDS); // would wait for the resize, which waits for us, and fail here
        } finally {
            resume.countDown();
        }
        int inserted = resizer.get(30, TimeUnit.SECONDS);

        for (int i = 0; i < OLD_KEYS; i++) {
            assertThat(table.decide(THREE_AN_HOUR, "old-" + i, 1, T0, T0).remaining()).as("old-" + i).isZero();
            assertThat(table.decide(THREE_AN_HOUR, "old-" + i, 1, T0, T0).allowed()).as("old-" + i).isFalse();
        }
        for (int i = 0; i < 20; i++) {
            assertThat(table.decide(THREE_AN_HOUR, "during-" + i, 1, T0, T0).remaining()).isEqualTo(1);
        }
        for (int i = 0; i < inserted; i++) {
            assertThat(table.decide(THREE_AN_HOUR, "new-" + i, 0, T0, T0).remaining()).as("new-" + i).isEqualTo(2);
        }
        assertThat(table.size()).isEqualTo(OLD_KEYS + 20 + inserted);
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
