package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** What the process remembers of Redis's rejections, without Redis. */
class RejectionMemoryTest {
    private static final long MS = 1_000_000L;
    private static final Rule RULE = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/1s")));

    /**
     * A bug a review found: a rejection was remembered for its retry-after from when its answer was read, not from
     * when its call was sent. Redis decided in between, so an answer that waited to be read (behind a busy
     * continuation on the connection's reading thread: 300 ms in the review's run) was remembered past the moment
     * Redis admits again, and a request met a rejection Redis would not have made.
     */
    @Test
    void aRejectionIsRememberedForItsRetryAfterFromTheSending() {
        RejectionMemory memory = new RejectionMemory(true, 100, 10);
        Decision rejected = new Decision(false, 0, 500 * MS, 500 * MS, 0, RULE.limits().get(0));
        long sent = System.nanoTime() - 300 * MS; // its answer read 300 ms after the call went
        memory.remember(RULE, "k", 1, Store.STORE_CLOCK, rejected, memory.resets(), sent);
        Decision recalled = memory.recall(RULE, "k", 1, Store.STORE_CLOCK);
        assertThat(recalled).isNotNull();
        assertThat(recalled.retryAfterNanos()).as("what is left of 500 ms from the sending").isBetween(0L, 200 * MS);

        long longAgo = System.nanoTime() - 600 * MS; // a rejection whose retry-after passed before its answer came
        memory.remember(RULE, "late", 1, Store.STORE_CLOCK, rejected, memory.resets(), longAgo);
        assertThat(memory.recall(RULE, "late", 1, Store.STORE_CLOCK)).as("Redis admits again already").isNull();
    }
}
