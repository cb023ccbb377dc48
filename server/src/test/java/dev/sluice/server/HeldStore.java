package dev.sluice.server;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The in-memory store, whose answers are held back while {@link #hold} is in force: a store that answers later, as
 * one of an application's own may, or a Redis that is slow.
 */
public final class HeldStore implements Store {
    private final InMemoryStore decides = new InMemoryStore();
    private final AtomicInteger asked = new AtomicInteger();
    private volatile CompletableFuture<Void> gate = CompletableFuture.completedFuture(null);

    /** From now on, answers wait for {@link #release}. */
    public void hold() {
        gate = new CompletableFuture<>();
    }

    /** Lets every answer held go. */
    public void release() {
        gate.complete(null);
    }

    /** How many decisions were asked for, asynchronously, so far. */
    public int asked() {
        return asked.get();
    }

    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        return decides.decide(rule, key, cost, nowNanos);
    }

    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, long nowNanos) {
        asked.incrementAndGet();
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
