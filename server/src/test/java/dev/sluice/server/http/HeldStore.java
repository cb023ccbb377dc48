package dev.sluice.server.http;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The in-memory store, whose answers are held back while {@link #hold} is in force: a store that answers later, as
 * one of an application's own may, or a Redis that is slow.
 */
final class HeldStore implements Store {
    private final InMemoryStore decides = new InMemoryStore();
    private volatile CompletableFuture<Void> gate = CompletableFuture.completedFuture(null);

    void hold() {
        gate = new CompletableFuture<>();
    }

    void release() {
        gate.complete(null);
    }

    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        return decides.decide(rule, key, cost, nowNanos);
    }

    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, long nowNanos) {
        Decision decision = decides.decide(rule, key, cost, nowNanos);
        return gate.thenApplyAsync(open -> decision);
    }

    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, Clock clock) {
        return decideAsync(rule, key, cost, clock.nanos());
    }

    @Override
    public void reset(Rule rule, String key) {
        decides.reset(rule, key);
    }
}
