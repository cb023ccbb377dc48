package dev.sluice.redis;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The batcher's hand-over, with calls the test answers by hand (the Redis tests cannot choose which thread
 * answers a call, nor which connection that thread uses).
 */
class BatcherTest {
    private final List<CompletableFuture<String>> calls = new CopyOnWriteArrayList<>();
    private final Batcher batcher = new Batcher(new String[10], (keys, arguments) -> {
        CompletableFuture<String> reply = new CompletableFuture<>();
        calls.add(reply);
        return reply;
    }, 64, TimeUnit.SECONDS.toNanos(30));

    /**
     * A bug a review found: a caller's continuation, run by the thread answering a call, decided again on the
     * same batcher and waited; the decision waited for that call's hand-over, which that very thread was to
     * make, so it waited for good. Now it goes alone, at once.
     */
    @Test
    void aContinuationThatDecidesAgainAndWaitsOnTheAnsweringThreadIsSent() throws Exception {
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "", "", "1");
        CompletableFuture<String> nested = first.thenApply(answer -> batcher.submit("sluice:{b}", "", "", "1").join());
        assertThat(calls).hasSize(1);
        CompletableFuture.runAsync(() -> calls.get(0).complete("1 0 0 0 0 0"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (calls.size() < 2) {
            assertThat(System.nanoTime()).as("the nested decision was sent").isLessThan(deadline);
            Thread.sleep(10);
        }
        calls.get(1).complete("0 0 5 5 0 0");
        assertThat(nested.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 5 5 0 0");
    }

    /** What arrives while a call is in flight leaves together once it is answered, each with its own answer. */
    @Test
    void decisionsThatArriveWhileACallIsInFlightLeaveTogether() throws Exception {
        CompletableFuture<String> first = batcher.submit("sluice:{a}", "", "", "1");
        CompletableFuture<String> second = batcher.submit("sluice:{b}", "", "", "2");
        CompletableFuture<String> third = batcher.submit("sluice:{c}", "", "", "3");
        assertThat(calls).hasSize(1);
        calls.get(0).complete("1 9 0 1 0 0");
        assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("1 9 0 1 0 0");
        assertThat(calls).as("the two that waited, in one call").hasSize(2);
        calls.get(1).complete("1 8 0 2 0 0,0 0 7 7 0 0");
        assertThat(second.get(10, TimeUnit.SECONDS)).isEqualTo("1 8 0 2 0 0");
        assertThat(third.get(10, TimeUnit.SECONDS)).isEqualTo("0 0 7 7 0 0");
    }
}
