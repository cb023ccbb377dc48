package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A value Sluice did not write under one of its keys (another program's, of another type, a state cut short, numbers
 * past 2^53) is read as untouched, by both scripts, and written over when a request is admitted; a string is dropped
 * as an untouched key's state is, a value of another type left as it is. A review of the scripts found each such
 * value failing every call on its key; in a batch of gcra.lua, failing the other keys' decisions too, some of them
 * already charged, since Redis does not undo what a script wrote before its error.
 */
class ForeignValuesTest {
    private static final long T = 1_700_000_000_000L * 1_000_000L;
    private final RedisServer redis = SharedRedis.server();
    /** Raises failures: a script's error is an exception here, not the failure policy's decision. */
    private final RedisStore store = SharedRedis.store();

    private static final List<Rule> RULES = List.of(
            Rule.of(Algorithm.GCRA, List.of(Limit.parse("5/1s"))), // gcra.lua
            Rule.of(Algorithm.GCRA, List.of(Limit.parse("5/1s"), Limit.parse("50/1m"))), // decide.lua
            Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("5/1s"), Limit.parse("50/1m"))),
            Rule.of(Algorithm.TOKEN_BUCKET, List.of(Limit.parse("5/1s refill=interval"))),
            Rule.of(Algorithm.SLIDING_WINDOW, List.of(Limit.parse("5/1s"))),
            Rule.of(Algorithm.SLIDING_LOG, List.of(Limit.parse("5/1s"))));

    /** Commands that leave a foreign value at {@code KEYS[1]}, by a name for the messages. */
    private static final List<String[]> FOREIGN = List.of(
            new String[] {"a word", "redis.call('SET', KEYS[1], 'hello')"},
            new String[] {"a 'g' cut short", "redis.call('SET', KEYS[1], 'g123')"},
            new String[] {"NaN as binary", "redis.call('SET', KEYS[1], struct.pack('<Bddddd', 103, 0/0, 0/0, 0/0, 0/0, 0/0))"},
            new String[] {"inf as binary", "redis.call('SET', KEYS[1], struct.pack('<Bddddd', 103, 1/0, 1/0, 1, 1, 0))"},
            new String[] {"a clock of words", "redis.call('SET', KEYS[1], 'nan inf|1 2 3')"},
            new String[] {"a limit of words", "redis.call('SET', KEYS[1], '1 2|nan 5 6|inf 7')"},
            new String[] {"a TAT past 2^53 as binary", "redis.call('SET', KEYS[1], struct.pack('<Bddddd', 103, 1, 0, 1e20, 0, 0))"},
            new String[] {"a limit past 2^53", "redis.call('SET', KEYS[1], '0 0|99999999999999999999 0 0')"},
            new String[] {"a log of fewer entries than it says", "redis.call('SET', KEYS[1], '1 0|3 u3 5 5 1 9 9 1')"},
            new String[] {"a log entry past 2^53", "redis.call('SET', KEYS[1], '0 0|1 u9 99999999999999999999 0 1')"},
            new String[] {"a TAT thirty thousand years on", "redis.call('SET', KEYS[1], '0 0|999999999999999 0 0')"},
            new String[] {"a clock thirty thousand years on", "redis.call('SET', KEYS[1], '999999999999999 0|1 1 0')"},
            new String[] {"a binary TAT thirty thousand years on", "redis.call('SET', KEYS[1], struct.pack('<Bddddd', 103, 1, 0, 1e15, 0, 0))"},
            new String[] {"a hash", "redis.call('HSET', KEYS[1], 'f', 'v')"},
            new String[] {"a list", "redis.call('RPUSH', KEYS[1], 'a', 'b')"});

    @Test
    void aForeignValueIsDecidedAsAnUntouchedKeyAndWrittenOver() throws IOException {
        try (Resp resp = redis.connect()) {
            for (int r = 0; r < RULES.size(); r++) {
                Rule rule = RULES.get(r);
                for (String[] foreign : FOREIGN) {
                    String key = "foreign-" + r + "-" + foreign[0];
                    resp.call("EVAL", foreign[1], "1", RedisStore.redisKey(key));
                    Decision first = store.decide(rule, key, 1, T);
                    assertThat(first).as("%s, %s", rule, foreign[0]).isEqualTo(rule.decide(null, T, 1).decision());
                    assertThat(resp.call("TYPE", RedisStore.redisKey(key))).as("written over").isEqualTo("string");
                    Decision second = store.decide(rule, key, 1, T);
                    assertThat(second).as("%s, %s: counted on", rule, foreign[0])
                            .isEqualTo(rule.decide(rule.decide(null, T, 1).next(), T, 1).decision());
                }
            }
        }
    }

    /**
     * A rejection, and a peek, on a foreign value of another type leave it as it was: only an admission writes; a
     * foreign string is read as an untouched key's state, and a peek drops it, as it drops such a state.
     */
    @Test
    void aRejectionLeavesAForeignValueAsItWas() throws IOException {
        try (Resp resp = redis.connect()) {
            for (Rule rule : RULES) {
                String key = "foreign-rejected-" + rule.algorithm().label() + rule.limits().size();
                resp.call("HSET", RedisStore.redisKey(key), "f", "v");
                assertThat(store.decide(rule, key, 1_000, T).allowed()).as("%s: more than it holds", rule).isFalse();
                assertThat(store.decide(rule, key, 0, T).allowed()).as("%s: a peek", rule).isTrue();
                assertThat(resp.call("TYPE", RedisStore.redisKey(key))).isEqualTo("hash");
                resp.call("DEL", RedisStore.redisKey(key));
                resp.call("SET", RedisStore.redisKey(key), "hello");
                assertThat(store.decide(rule, key, 0, T).allowed()).as("%s: a peek", rule).isTrue();
                assertThat(resp.call("EXISTS", RedisStore.redisKey(key))).as("%s: dropped", rule).isEqualTo(0L);
            }
        }
    }

    /**
     * Decisions of one gcra rule sent at once go in batches of one call of gcra.lua: a foreign value among their keys
     * fails none of them, and each is charged once.
     */
    @Test
    void aForeignValueInABatchFailsNoneOfTheOthers() throws Exception {
        Rule rule = RULES.get(0);
        try (Resp resp = redis.connect()) {
            for (int round = 0; round < 20; round++) {
                List<CompletableFuture<Decision>> decisions = new ArrayList<>();
                for (int k = 0; k < 16; k++) {
                    String key = "batch-" + round + "-" + k;
                    if (k % 4 == 1) {
                        resp.call("SET", RedisStore.redisKey(key), "hello");
                    }
                    decisions.add(store.decideAsync(rule, key, 1, T).toCompletableFuture());
                }
                for (CompletableFuture<Decision> decision : decisions) {
                    assertThat(decision.get()).isEqualTo(rule.decide(null, T, 1).decision());
                }
            }
        }
    }
}
