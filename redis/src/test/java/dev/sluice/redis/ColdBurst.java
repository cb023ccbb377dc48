package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.Store;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A separate process for {@link RedisClusterStartTest}, so that its JVM is as cold as a server's that has just
 * started: opens a store with the defaults but failing closed, and at once asks {@code count} decisions together,
 * of cost 1 on keys {@code burst-0} onwards, fixed-window and gcra (2/1h) in turn. Prints how many were admitted
 * with one left, then the store's counts.
 *
 * <p>Arguments: uri count.
 */
public final class ColdBurst {
    private ColdBurst() {
    }

    public static void main(String[] args) throws Exception {
        int count = Integer.parseInt(args[1]);
        List<Rule> rules = List.of(Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("2/1h"))),
                Rule.of(Algorithm.GCRA, List.of(Limit.parse("2/1h"))));
        try (RedisStore store = RedisStore.builder(args[0]).onFailure(FailurePolicy.CLOSED).build()) {
            List<CompletableFuture<Decision>> answers = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                answers.add(store.decideAsync(rules.get(i % 2), "burst-" + i, 1, Store.STORE_CLOCK)
                        .toCompletableFuture());
            }
            long admitted = 0;
            for (CompletableFuture<Decision> answer : answers) {
                Decision decision = answer.get(1, TimeUnit.MINUTES);
                admitted += decision.allowed() && decision.remaining() == 1 ? 1 : 0;
            }
            System.out.println(admitted + " " + store.counts());
        }
    }
}
