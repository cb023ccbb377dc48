package dev.sluice.algorithm;

import dev.sluice.Limit;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The log's states share their arrays (see {@link SlidingLog}): a state must read the same whatever is later
 * made from it, and two states made from one must not write each other's entries.
 */
class SlidingLogTest {
    private static final long MS = 1_000_000L;
    private final SlidingLog log = new SlidingLog(Limit.parse("5/100ms"));

    /** Admits at each time in turn, each with a cost of 1. */
    private SlidingLog.Log admitted(long... times) {
        SlidingLog.Log state = null;
        for (long t : times) {
            state = log.advance(state, t);
            assertThat(log.wait(state, t, 1)).isZero();
            state = log.take(state, t, 1, 0);
        }
        return state;
    }

    @Test
    void twoStatesMadeFromOneKeepTheirOwnNewestEntry() {
        SlidingLog.Log base = admitted(0, 10 * MS, 20 * MS);
        // two threads deciding from the same state: the first appends in place, the second must copy
        SlidingLog.Log first = log.take(base, 30 * MS, 1, 0);
        SlidingLog.Log second = log.take(base, 40 * MS, 2, 0);
        assertThat(first.times).isSameAs(base.times);
        assertThat(second.times).isNotSameAs(base.times);
        assertThat(log.resetAfter(first, 30 * MS)).isEqualTo(100 * MS);
        assertThat(log.resetAfter(second, 40 * MS)).isEqualTo(100 * MS);
        assertThat(log.remaining(first, 30 * MS)).isEqualTo(1);
        assertThat(log.remaining(second, 40 * MS)).isZero();
        // each keeps its own entries as time passes: 0 expires at 100 ms, 10 at 110, 20 at 120
        assertThat(log.remaining(log.advance(first, 115 * MS), 115 * MS)).isEqualTo(3);
        assertThat(log.remaining(log.advance(second, 125 * MS), 125 * MS)).isEqualTo(3);
        // and the state they came from still ends where it did
        assertThat(log.resetAfter(base, 20 * MS)).isEqualTo(100 * MS);
        assertThat(log.remaining(base, 20 * MS)).isEqualTo(2);
        // an append to it now copies too, and waits as three entries say
        SlidingLog.Log third = log.take(base, 50 * MS, 2, 0);
        assertThat(log.wait(third, 50 * MS, 1)).isEqualTo(50 * MS);
        assertThat(log.wait(first, 50 * MS, 1)).isZero();
    }

    @Test
    void expiringEntriesNarrowsTheViewAndAppendingFillsTheRoomACopyLeft() {
        SlidingLog.Log state = admitted(0, 1, 2, 3, 4);
        long[] arrays = state.times;
        // 0 and 1 expire at 100 ms + 1 ns: the advanced log is a view of the same arrays
        SlidingLog.Log later = log.advance(state, 100 * MS + 1);
        assertThat(later.times).isSameAs(arrays);
        assertThat(later.size()).isEqualTo(3);
        assertThat(log.wait(later, 100 * MS + 1, 3)).isEqualTo(1); // until 2 expires
        // appending, one entry each 30 ms: the log holds three or four, and every copy leaves room for three appends
        // at least, so most appends need no copy
        int copies = 0;
        long[] seen = later.times;
        SlidingLog.Log grown = later;
        for (int i = 0; i < 1_000; i++) {
            long t = 200 * MS + i * 30 * MS;
            grown = log.advance(grown, t);
            assertThat(log.wait(grown, t, 1)).isZero();
            grown = log.take(grown, t, 1, 0);
            if (grown.times != seen) {
                copies++;
                seen = grown.times;
            }
        }
        assertThat(grown.size()).isEqualTo(4);
        assertThat(log.remaining(grown, 200 * MS + 999 * 30 * MS)).isEqualTo(1);
        assertThat(copies).isBetween(1, 1_000 / 3);
    }

    /**
     * A review found a burst's arrays kept long after it expired, until appends reached their end: an admission to
     * arrays four times longer than its entries copies them smaller.
     */
    @Test
    void aBurstLongExpiredDoesNotKeepItsMemory() {
        SlidingLog wide = new SlidingLog(Limit.parse("1000/1s"));
        SlidingLog.Log state = null;
        for (int i = 0; i < 1_000; i++) {
            long t = i * 1_000L; // a burst of 1,000 over the first millisecond
            state = wide.take(wide.advance(state, t), t, 1, 0);
        }
        assertThat(state.times.length).isGreaterThanOrEqualTo(1_000);
        // a second later all but the last five have expired; the next admission leaves arrays of a few entries
        long later = 1_000 * MS + 995 * 1_000L;
        SlidingLog.Log after = wide.take(wide.advance(state, later), later, 1, 0);
        assertThat(after.size()).isEqualTo(5);
        assertThat(after.times.length).isLessThan(16);
        assertThat(wide.remaining(after, later)).isEqualTo(995);
        assertThat(wide.resetAfter(after, later)).isEqualTo(1_000 * MS);
    }

    @Test
    void requestsAtOneInstantEachHaveAnEntryAndWaitTheSame() {
        SlidingLog.Log state = admitted(7, 7, 7, 8, 8);
        assertThat(state.size()).isEqualTo(5);
        // the first two that can expire are both at 7: the wait for 2 ends when the instant 7 expires
        assertThat(log.wait(state, 9, 2)).isEqualTo(100 * MS + 7 - 9);
        assertThat(log.wait(state, 9, 4)).isEqualTo(100 * MS + 8 - 9);
    }
}
