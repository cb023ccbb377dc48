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

    /**
     * A bug a review found: the bound was per rule, a hundred thousand under each of a thousand rules, and calls of
     * Envoy's each bringing a limit of their own (a rule each amount) filled 802,000 entries, 191 MB of heap. The
     * bound is over every rule together; a rule past the most rules starts the memory again.
     */
    @Test
    void atMostTheBoundIsRememberedUnderEveryRuleTogether() {
        RejectionMemory memory = new RejectionMemory(true, 10, 4);
        List<Rule> rules = new java.util.ArrayList<>();
        for (int amount = 1; amount <= 4; amount++) {
            rules.add(Rule.of(Algorithm.GCRA, List.of(Limit.parse(amount + "/1h"))));
        }
        for (Rule rule : rules) {
            Decision rejected = new Decision(false, 0, 60_000 * MS, 60_000 * MS, 0, rule.limits().get(0));
            for (int i = 0; i < 5; i++) {
                memory.remember(rule, "k" + i, 1, Store.STORE_CLOCK, rejected, memory.resets(), System.nanoTime());
            }
        }
        assertThat(memory.remembered()).isEqualTo(10);
        assertThat(memory.rules()).isEqualTo(4);
        assertRecalled(memory.recall(rules.get(0), "k4", 1, Store.STORE_CLOCK), 0, 60_000 * MS, rules.get(0));
        assertRecalled(memory.recall(rules.get(1), "k4", 1, Store.STORE_CLOCK), 0, 60_000 * MS, rules.get(1));
        assertThat(memory.recall(rules.get(2), "k0", 1, Store.STORE_CLOCK)).as("full, none of the last ten").isNull();

        Rule fifth = Rule.of(Algorithm.GCRA, List.of(Limit.parse("5/1h")));
        memory.remember(fifth, "k0", 1, Store.STORE_CLOCK, new Decision(false, 0, 60_000 * MS, 60_000 * MS, 0,
                fifth.limits().get(0)), memory.resets(), System.nanoTime());
        assertThat(memory.rules()).as("past the most rules: started again").isEqualTo(1);
        assertThat(memory.remembered()).isEqualTo(1);
        assertRecalled(memory.recall(fifth, "k0", 1, Store.STORE_CLOCK), 0, 60_000 * MS, fifth);
        assertThat(memory.recall(rules.get(0), "k4", 1, Store.STORE_CLOCK)).isNull();

        Decision admitted = new Decision(true, 3, 0, 0, 0, fifth.limits().get(0));
        memory.remember(rules.get(0), "k0", 2, Store.STORE_CLOCK, admitted, memory.resets(), System.nanoTime());
        assertThat(memory.recall(fifth, "k0", 1, Store.STORE_CLOCK)).as("charged under another rule: forgotten").isNull();
    }

    /**
     * A bug a review found: a weighted rejection was remembered with its remaining, which grows as tokens come back
     * (or a shorter window of the rule starts again): 10 asked, 0 left, then a second later the memory still said 0
     * where Redis had 5, and a request of 4 was admitted. Only a rejection whose remaining holds until its
     * retry_after is remembered: one that leaves cost - 1.
     */
    @Test
    void onlyARejectionWhoseRemainingHoldsUntilItsRetryAfterIsRemembered() {
        RejectionMemory memory = new RejectionMemory(true, 100, 10);
        Rule rule = Rule.of(Algorithm.TOKEN_BUCKET, List.of(Limit.parse("10/2s")));
        Decision leavingNone = new Decision(false, 0, 2_000 * MS, 2_000 * MS, 0, rule.limits().get(0));
        memory.remember(rule, "k", 10, Store.STORE_CLOCK, leavingNone, memory.resets(), System.nanoTime());
        assertThat(memory.recall(rule, "k", 10, Store.STORE_CLOCK)).as("its remaining grows: asked again").isNull();

        Decision leavingNine = new Decision(false, 9, 200 * MS, 200 * MS, 0, rule.limits().get(0));
        memory.remember(rule, "k", 10, Store.STORE_CLOCK, leavingNine, memory.resets(), System.nanoTime());
        assertRecalled(memory.recall(rule, "k", 10, Store.STORE_CLOCK), 9, 200 * MS, rule);

        Decision ofOne = new Decision(false, 0, 200 * MS, 200 * MS, 0, rule.limits().get(0));
        memory.remember(rule, "one", 1, Store.STORE_CLOCK, ofOne, memory.resets(), System.nanoTime());
        assertRecalled(memory.recall(rule, "one", 1, Store.STORE_CLOCK), 0, 200 * MS, rule);

        Rule window = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("10/2s")));
        Decision windowFull = new Decision(false, 0, 1_500 * MS, 1_500 * MS, 0, window.limits().get(0));
        memory.remember(window, "w", 10, Store.STORE_CLOCK, windowFull, memory.resets(), System.nanoTime());
        assertRecalled(memory.recall(window, "w", 10, Store.STORE_CLOCK), 0, 1_500 * MS, window);
        Rule windows = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("10/2s"), Limit.parse("100/1h")));
        memory.remember(windows, "w", 10, Store.STORE_CLOCK, windowFull, memory.resets(), System.nanoTime());
        assertThat(memory.recall(windows, "w", 10, Store.STORE_CLOCK)).as("the 2 s window starts again sooner")
                .isNull();
    }

    /**
     * A recalled rejection: rejected, with the remaining and the limit Redis answered, and what is left of its
     * retry_after (and of its reset_after, counted down alike) since it was remembered, a moment ago.
     */
    private static void assertRecalled(Decision recalled, long remaining, long retryAfterNanos, Rule rule) {
        assertThat(recalled).isNotNull();
        assertThat(recalled.allowed()).isFalse();
        assertThat(recalled.remaining()).isEqualTo(remaining);
        assertThat(recalled.limit()).isEqualTo(rule.limits().get(0));
        assertThat(recalled.retryAfterNanos()).isBetween(retryAfterNanos - 1_000 * MS, retryAfterNanos);
        assertThat(recalled.resetAfterNanos()).isBetween(retryAfterNanos - 1_000 * MS, retryAfterNanos);
        assertThat(recalled.delayNanos()).isZero();
    }
}
