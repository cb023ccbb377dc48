package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import dev.sluice.testkit.RandomTraces;
import dev.sluice.testkit.ReferenceModel;
import dev.sluice.testkit.Request;
import dev.sluice.testkit.StoreConformance;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Random traces, to the nanosecond, through the in-memory store and a real Redis: the same decisions, and
 * the reference model's; and the same again with a whole trace in flight at once, so that decisions leave
 * for Redis many to a call.
 */
class DifferentialTest {
    static Stream<StoreConformance.Scenario> scenarios() {
        return StoreConformance.scenarios();
    }

    /** An in-memory store for traces stamped back across keys: it keeps expired keys an hour, as Redis does. */
    private static Store replaying() {
        return InMemoryStore.builder().outOfOrder(Duration.ofHours(1)).build();
    }

    /** The shared store, on a server emptied of every key. */
    private static RedisStore emptied() {
        SharedRedis.flush();
        return SharedRedis.store();
    }

    /** 400 requests on up to three keys, some stamped back in time, at the scale of the scenario's periods. */
    private static List<Request> trace(long seed, StoreConformance.Scenario scenario) {
        return RandomTraces.generate(seed, 400, scenario.longestPeriod(), 12, true, 1_763_800_000_000_000_000L);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void inMemoryAndRedisDecideAlike(StoreConformance.Scenario scenario) {
        for (long seed = 100; seed < 110; seed++) {
            decideAlike(scenario, "seed " + seed, trace(seed, scenario));
        }
    }

    /**
     * A whole trace handed to the store at once, from one thread (so on one connection): gcra rules' decisions
     * leave in calls of many keys, the others as a pipeline; either way each decision is what it would be alone,
     * in the trace's order.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void decisionsSentTogetherDecideAsOneAtATime(StoreConformance.Scenario scenario) {
        Rule rule = Rule.of(scenario.algorithm(), scenario.limits(), scenario.mode(), scenario.maxDelayNanos());
        for (long seed = 200; seed < 205; seed++) {
            RedisStore store = emptied();
            Store memory = replaying();
            List<Request> trace = trace(seed, scenario);
            List<CompletableFuture<Decision>> inFlight = new ArrayList<>();
            for (Request request : trace) {
                inFlight.add(store.decideAsync(rule, request.key(), request.cost(), request.nanos()).toCompletableFuture());
            }
            for (int i = 0; i < trace.size(); i++) {
                Request request = trace.get(i);
                Decision inMemory = memory.decide(rule, request.key(), request.cost(), request.nanos());
                assertThat(inFlight.get(i).join()).as("on Redis, seed %d, request %d: %s", seed, i, request)
                        .isEqualTo(inMemory);
            }
        }
    }

    private static final long DAY = TimeUnit.DAYS.toNanos(1);
    private static final long START = 1_763_800_000_000_000_000L;

    /**
     * Rules at the far ends of what the Redis store takes, where two times lie more than 2^53 ns apart or a
     * count times a duration passes 2^53, and a double would round: random traces at their scale, costs
     * scaled by {@code costScale} (odd, so that products are seldom round), give the same decisions on Redis as
     * in memory and as the reference.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("farEnds")
    void atTheFarEndsOfTheRedisBoundsRedisDecidesAlike(StoreConformance.Scenario scenario, long costScale, long start) {
        Rule rule = Rule.of(scenario.algorithm(), scenario.limits(), scenario.mode(), scenario.maxDelayNanos());
        RedisStore.checkExact(rule);
        long maxCost = scenario.limits().stream().mapToLong(Limit::burst).max().orElseThrow() / costScale + 1;
        for (long seed = 300; seed < 306; seed++) {
            List<Request> trace = new ArrayList<>();
            for (Request request : RandomTraces.generate(seed, 150, scenario.longestPeriod(), maxCost, true, start)) {
                trace.add(new Request(request.nanos(), request.key(), request.cost() * costScale));
            }
            decideAlike(scenario, "seed " + seed, trace);
        }
    }

    static Stream<org.junit.jupiter.params.provider.Arguments> farEnds() {
        // the last times a rule takes: 2^62 ns, less room for a trace of periods of a day (150 gaps of at most two
        // periods, and idle spells of at most 62)
        long late = Rule.MAX_TIME_NANOS - 2_000 * DAY;
        return Stream.of(
                far(scenario(Algorithm.SLIDING_LOG, Mode.REJECT, 0, "1/60d"), 1, START),
                far(scenario(Algorithm.SLIDING_LOG, Mode.REJECT, 0, "3/100d", "2/9d"), 1, START),
                far(scenario(Algorithm.TOKEN_BUCKET, Mode.DELAY, 40 * DAY, "2/60d burst=1 refill=interval"), 1, START),
                far(scenario(Algorithm.TOKEN_BUCKET, Mode.REJECT, 0, "3/100d burst=1 refill=interval"), 1, START),
                far(scenario(Algorithm.SLIDING_WINDOW, Mode.REJECT, 0, "10000000000/1m"), 999_999_937, START),
                far(scenario(Algorithm.SLIDING_WINDOW, Mode.REJECT, 0, "1000000000000/3ms", "1099511627776/7ms"),
                        99_999_999_977L, START),
                // a review found no far-end trace for these: the most used scripts (gcra.lua decides gcra, the greedy
                // token bucket and the leaky bucket), at periods of months, amounts of 2^40, and the last times
                // (B·P/L under 2^52 ns and B·L under 2^53: the bounds of RuleScript.checkFits, which these rows found
                // letting B·L past 2^63 by, wrapped round)
                far(scenario(Algorithm.GCRA, Mode.REJECT, 0, "7/70d burst=5"), 1, START),
                far(scenario(Algorithm.GCRA, Mode.DELAY, 40 * DAY, "3/50d"), 1, START),
                far(scenario(Algorithm.GCRA, Mode.REJECT, 0, "94906265/1s"), 999_983, START),
                far(scenario(Algorithm.TOKEN_BUCKET, Mode.REJECT, 0, "90000000/3ms burst=94906265"), 999_983, START),
                far(scenario(Algorithm.TOKEN_BUCKET, Mode.REJECT, 0, "5/50d", "2/9d"), 1, START),
                far(scenario(Algorithm.LEAKY_BUCKET, Mode.SHAPING, Rule.NO_MAX_DELAY, "4/50d"), 1, START),
                far(scenario(Algorithm.FIXED_WINDOW, Mode.REJECT, 0, "1099511627776/7ms"), 99_999_999_977L, START),
                far(scenario(Algorithm.FIXED_WINDOW, Mode.REJECT, 0, "3/100d", "2/9d"), 1, START),
                far(scenario(Algorithm.GCRA, Mode.REJECT, 0, "3/1d"), 1, late),
                far(scenario(Algorithm.FIXED_WINDOW, Mode.REJECT, 0, "3/1d"), 1, late),
                far(scenario(Algorithm.SLIDING_WINDOW, Mode.REJECT, 0, "3/1d"), 1, late),
                far(scenario(Algorithm.SLIDING_LOG, Mode.REJECT, 0, "3/1d"), 1, late),
                far(scenario(Algorithm.TOKEN_BUCKET, Mode.REJECT, 0, "3/1d refill=interval"), 1, late));
    }

    private static org.junit.jupiter.params.provider.Arguments far(StoreConformance.Scenario scenario, long costScale,
                                                                   long start) {
        return org.junit.jupiter.params.provider.Arguments.of(scenario, costScale, start);
    }

    private static StoreConformance.Scenario scenario(Algorithm algorithm, Mode mode, long maxDelay, String... limits) {
        return new StoreConformance.Scenario(algorithm + " " + String.join(" + ", limits) + (mode == Mode.DELAY
                ? " delay " + maxDelay / DAY + "d" : ""), algorithm, Stream.of(limits).map(Limit::parse).toList(),
                mode, maxDelay);
    }

    /** Decides {@code trace} on the reference, in memory and on Redis (emptied first), and asserts they agree. */
    private static List<Decision> decideAlike(StoreConformance.Scenario scenario, List<Request> trace) {
        return decideAlike(scenario, "the trace pinned", trace);
    }

    private static List<Decision> decideAlike(StoreConformance.Scenario scenario, String which, List<Request> trace) {
        Rule rule = Rule.of(scenario.algorithm(), scenario.limits(), scenario.mode(), scenario.maxDelayNanos());
        RedisStore store = emptied();
        Store memory = replaying();
        ReferenceModel reference = new ReferenceModel(scenario.algorithm(), scenario.limits(), scenario.mode(),
                scenario.maxDelayNanos());
        List<Decision> decided = new ArrayList<>();
        for (int i = 0; i < trace.size(); i++) {
            Request request = trace.get(i);
            Decision spec = reference.decide(request.key(), request.nanos(), request.cost());
            Decision inMemory = memory.decide(rule, request.key(), request.cost(), request.nanos());
            Decision onRedis = store.decide(rule, request.key(), request.cost(), request.nanos());
            assertThat(inMemory).as("%s in memory, %s, request %d: %s", scenario, which, i, request).isEqualTo(spec);
            assertThat(onRedis).as("%s on Redis, %s, request %d: %s", scenario, which, i, request).isEqualTo(inMemory);
            decided.add(onRedis);
        }
        return decided;
    }

    /** A past bug: Redis forgot a sliding log's entries 52.1 days old (2^52 ns), whatever the period. */
    @Test
    void aSlidingLogOfSixtyDaysKeepsAnEntryFiftyThreeDaysOld() {
        List<Decision> decided = decideAlike(scenario(Algorithm.SLIDING_LOG, Mode.REJECT, 0, "1/60d"),
                List.of(new Request(START, "k", 1), new Request(START + 53 * DAY, "k", 1)));
        assertThat(decided.get(1)).isEqualTo(new Decision(false, 0, 7 * DAY, 7 * DAY, 0, Limit.parse("1/60d")));
    }

    /**
     * A past bug a review found: an interval refill's next refill, a time's nanoseconds plus a period of nearly 2^53
     * ns, passed 2^53 and was stored 1 ns late, so that a request at the refill was rejected on Redis.
     */
    @Test
    void anIntervalRefillOfNearly2To53NanosecondsRefillsOnTheNanosecond() {
        long period = 9_007_199_254_000_000L;
        long first = START + 5_999_999;
        List<Decision> decided = decideAlike(scenario(Algorithm.TOKEN_BUCKET, Mode.REJECT, 0,
                "2/9007199254ms burst=1 refill=interval"), List.of(new Request(first, "k", 1),
                new Request(first + period, "k", 1)));
        assertThat(decided.get(1).allowed()).as("refilled at the period's end").isTrue();
    }

    /** A past bug: Redis took an interval bucket in debt for full once 52.1 days had passed its next refill. */
    @Test
    void anIntervalBucketInDebtIsNotFullFiftyFiveDaysAfterItsNextRefill() {
        List<Decision> decided = decideAlike(scenario(Algorithm.TOKEN_BUCKET, Mode.DELAY, 40 * DAY,
                "2/60d burst=1 refill=interval"), List.of(new Request(START, "k", 1),
                new Request(START + 30 * DAY, "k", 1), new Request(START + 30 * DAY, "k", 1),
                new Request(START + 115 * DAY, "k", 1)));
        // two in debt, the next refill at 60 days: full again at 120; at 115 the refill of 60 has brought 0 tokens
        assertThat(decided.get(3).allowed()).isTrue();
        assertThat(decided.get(3).delayNanos()).as("waits for the refill at 120 days").isEqualTo(5 * DAY);
    }

    /**
     * A past bug: a sliding window of 10^10 a minute, at a time between milliseconds, rounded prev·(P − e) past
     * 2^53 and admitted a request that overshoots the limit by one part in 10^16.
     */
    @Test
    void aSlidingWindowOfTenBillionAMinuteWeighsExactlyBetweenMilliseconds() {
        long window = 1_763_799_960_000_000_000L;
        List<Decision> decided = decideAlike(scenario(Algorithm.SLIDING_WINDOW, Mode.REJECT, 0, "10000000000/1m"),
                List.of(new Request(window, "k", 9_999_999_959L), new Request(window + 99_756_097_561L, "k", 6_626_016_274L),
                        new Request(window + 99_756_097_561L, "k", 0)));
        assertThat(decided.get(1).allowed()).isFalse();
        assertThat(decided.get(1).retryAfterNanos()).isEqualTo(1);
        assertThat(decided.get(2).remaining()).isEqualTo(6_626_016_273L);
    }
}
