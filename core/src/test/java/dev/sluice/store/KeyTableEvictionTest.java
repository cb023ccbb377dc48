package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** Which keys a full table evicts, and that evicting leaves the table as fast as it found it. */
class KeyTableEvictionTest {
    private static final long T0 = 1_700_006_400L * 1_000_000_000L; // midnight: a day's window starts
    private static final Rule ONE_A_DAY = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1d")));
    private static final int KEYS = 16_000;

    /**
     * A bug pinned, found by measuring a flood of new keys into a full store: among keys last decided at the same
     * time, eviction took the first it met from the table's first slot, and slot order is hash order. Round after
     * round the survivors were those of high hashes; copied into the next table they packed into one probe run
     * that grew to 480,000 slots, and each new key walked it (new keys a second fell from 1.8 million to 50,000).
     * A hand that took every tied key it met did the same, more slowly. Here twenty tables' worth of new keys,
     * each table's decided at one time, go through a full table: its runs stay as short as chance makes them.
     */
    @Test
    void evictingRoundAfterRoundLeavesNoLongProbeRuns() {
        KeyTable table = new KeyTable(KEYS);
        for (int round = 0; round <= 20; round++) {
            long now = T0 + round * 1_000_000_000L;
            for (int i = 0; i < KEYS; i++) {
                String key = round + "-" + i;
                while (table.decide(ONE_A_DAY, key, 1, null, now, 0) == null) {
                    assertThat(table.evictLeastRecent(now, now)).isBetween(1L, 64L);
                }
            }
        }
        assertThat(table.size()).as("up to 64 evicted at a time").isBetween(KEYS - 63L, (long) KEYS);
        // twelve runs: 28 to 53 slots; taking every tied key the hand met, 1,021 to 3,011
        assertThat(table.longestRun()).as("of %d slots", table.capacity()).isLessThan(300);
    }

    /**
     * A rejection and a peek count as uses, for a key of one limit and one of several (a bug caught before it
     * landed: a decision on several limits carried no time, so a rejected key of two limits looked the oldest, or the
     * youngest, as the epoch's stamp fell).
     */
    @ParameterizedTest
    @ValueSource(strings = {"1/1d", "1/1d, 10/1h"})
    void evictionTakesTheOldestByLastAdmissionOrLastRejection(String limits) {
        // a time whose stamp is a large positive int (2^30): the bug's stamp of 0 then reads as the oldest
        long t1 = 1L << 54;
        Rule rule = Rule.of(Algorithm.FIXED_WINDOW, java.util.Arrays.stream(limits.split(", ")).map(Limit::parse).toList());
        KeyTable table = new KeyTable(32);
        for (int i = 0; i < 32; i++) {
            table.decide(rule, "k-" + i, 1, null, t1 + i * 1_000_000_000L, 0);
        }
        assertThat(table.decide(rule, "k-0", 1, null, t1 + 40_000_000_000L, 0).allowed()).as("in use").isFalse();
        table.decide(rule, "k-1", 0, null, t1 + 40_000_000_000L, 0); // a peek: in use too
        assertThat(table.evictLeastRecent(t1 + 41_000_000_000L, t1 + 41_000_000_000L)).as("32 / 16").isEqualTo(2);
        assertThat(table.size()).isEqualTo(30);
        for (int i = 0; i < 32; i++) {
            long remaining = table.decide(rule, "k-" + i, 0, null, t1 + 42_000_000_000L, 0).remaining();
            assertThat(remaining).as("k-%d", i).isEqualTo(i == 2 || i == 3 ? 1 : 0);
        }
        assertThat(table.evictLeastRecent(t1 + 42_000_000_000L, t1 + 42_000_000_000L)).as("room already").isZero();
    }
}
