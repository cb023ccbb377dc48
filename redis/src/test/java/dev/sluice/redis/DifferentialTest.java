package dev.sluice.redis;

import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import dev.sluice.testkit.RandomTraces;
import dev.sluice.testkit.ReferenceModel;
import dev.sluice.testkit.Request;
import dev.sluice.testkit.StoreConformance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
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
        Rule rule = Rule.of(scenario.algorithm(), scenario.limits(), scenario.mode(), scenario.maxDelayNanos());
        for (long seed = 100; seed < 110; seed++) {
            RedisStore store = emptied();
            Store memory = replaying();
            ReferenceModel reference = new ReferenceModel(scenario.algorithm(), scenario.limits(), scenario.mode(),
                    scenario.maxDelayNanos());
            List<Request> trace = trace(seed, scenario);
            for (int i = 0; i < trace.size(); i++) {
                Request request = trace.get(i);
                Decision spec = reference.decide(request.key(), request.nanos(), request.cost());
                Decision inMemory = memory.decide(rule, request.key(), request.cost(), request.nanos());
                Decision onRedis = store.decide(rule, request.key(), request.cost(), request.nanos());
                assertThat(inMemory).as("in memory, seed %d, request %d: %s", seed, i, request).isEqualTo(spec);
                assertThat(onRedis).as("on Redis, seed %d, request %d: %s", seed, i, request).isEqualTo(inMemory);
            }
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
}
