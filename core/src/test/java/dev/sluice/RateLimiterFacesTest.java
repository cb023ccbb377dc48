package dev.sluice;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The faces of {@link RateLimiter}: async, blocking ({@code acquire}) and listeners. */
class RateLimiterFacesTest {
    private static final long MS = 1_000_000L;
    private static final long S = 1_000 * MS;
    private static final long T0 = 1_700_000_000L * S;

    private final ManualClock clock = new ManualClock(T0);

    private RateLimiter.Builder limiter(Algorithm algorithm, String limit) {
        return RateLimiter.builder().algorithm(algorithm).limit(limit).clock(clock).sleeper(Sleeper.advancing(clock));
    }

    @Test
    void theAsyncFaceGivesTheSameDecisions() {
        RateLimiter sync = limiter(Algorithm.SLIDING_WINDOW, "3/1s").build();
        RateLimiter async = limiter(Algorithm.SLIDING_WINDOW, "3/1s").build();
        for (int i = 0; i < 5; i++) {
            Decision expected = sync.tryAcquire("k");
            CompletableFuture<Decision> answer = async.tryAcquireAsync("k").toCompletableFuture();
            assertThat(answer).isCompletedWithValue(expected);
        }
        assertThatThrownBy(() -> async.tryAcquireAsync("", 1)).hasMessage("key must not be empty");
    }

    @Test
    void acquireReservesWithGcraAndSleepsTheDelay() throws InterruptedException {
        RateLimiter limiter = limiter(Algorithm.GCRA, "2/1s").build();
        assertThat(limiter.acquire("k", 2, Duration.ZERO).allowed()).isTrue();
        Decision waited = limiter.acquire("k", Duration.ofSeconds(1));
        assertThat(waited.allowed()).isTrue();
        assertThat(waited.delayNanos()).isEqualTo(500 * MS);
        assertThat(clock.nanos()).isEqualTo(T0 + 500 * MS);
        // the next one would wait 500 ms: more than 100 ms, so it gives up at once and takes nothing
        Decision gaveUp = limiter.acquire("k", Duration.ofMillis(100));
        assertThat(gaveUp.allowed()).isFalse();
        assertThat(gaveUp.retryAfterNanos()).isEqualTo(400 * MS);
        assertThat(clock.nanos()).isEqualTo(T0 + 500 * MS);
        assertThat(limiter.tryAcquire("k", 0).resetAfterNanos()).isEqualTo(S);
    }

    @Test
    void acquireWaitsForTheNextWindowWhenItCannotReserve() throws InterruptedException {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "2/1s").build();
        limiter.tryAcquire("k", 2);
        clock.advanceNanos(200 * MS);
        assertThat(limiter.acquire("k", Duration.ofMillis(500)).allowed()).as("800 ms away").isFalse();
        assertThat(clock.nanos()).isEqualTo(T0 + 200 * MS);
        Decision admitted = limiter.acquire("k", Duration.ofSeconds(1));
        assertThat(admitted.allowed()).isTrue();
        assertThat(clock.nanos()).isEqualTo(T0 + S);
        assertThat(limiter.acquire("k", 3, Duration.ofDays(1)).never()).isTrue();
        assertThat(clock.nanos()).isEqualTo(T0 + S);
    }

    @Test
    void acquireHoldsAShapedRequestForItsTurn() throws InterruptedException {
        RateLimiter limiter = limiter(Algorithm.LEAKY_BUCKET, "4/1s").mode(Mode.SHAPING).build();
        for (int i = 0; i < 4; i++) {
            assertThat(limiter.acquire("k", Duration.ofSeconds(1)).allowed()).isTrue();
        }
        // each held for the queue ahead: 0, then 250 ms after the one before
        assertThat(clock.nanos()).isEqualTo(T0 + 750 * MS);
    }

    @Test
    void acquireIsInterruptible() {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1h").build();
        limiter.tryAcquire("k");
        Thread.currentThread().interrupt();
        assertThatThrownBy(() -> limiter.acquire("k", Duration.ofHours(2))).isInstanceOf(InterruptedException.class);
        assertThat(Thread.interrupted()).isFalse();
    }

    @Test
    void listenersHearEveryDecisionOnce() throws InterruptedException {
        List<String> heard = new ArrayList<>();
        AtomicReference<Decision> last = new AtomicReference<>();
        DecisionListener recorder = new DecisionListener() {
            @Override
            public void admitted(String key, long cost, Decision decision) {
                heard.add("admitted " + key + " " + cost);
                last.set(decision);
            }

            @Override
            public void delayed(String key, long cost, Decision decision) {
                heard.add("delayed " + key + " " + cost + " " + decision.delayNanos() / MS + "ms");
            }

            @Override
            public void rejected(String key, long cost, Decision decision) {
                heard.add("rejected " + key + " " + cost);
            }
        };
        DecisionListener broken = new DecisionListener() {
            @Override
            public void admitted(String key, long cost, Decision decision) {
                throw new IllegalStateException("a broken metrics sink");
            }
        };
        RateLimiter limiter = limiter(Algorithm.TOKEN_BUCKET, "2/1s").listener(broken).listener(recorder).build();
        Decision first = limiter.tryAcquire("a", 2);
        limiter.tryAcquire("a");
        limiter.acquire("a", Duration.ofSeconds(1));
        limiter.tryAcquireAsync("b", 0);
        assertThat(heard).containsExactly("admitted a 2", "rejected a 1", "delayed a 1 500ms", "admitted b 0");
        assertThat(first.allowed()).as("a failing listener changes nothing, and the others still hear").isTrue();
        assertThat(last.get().remaining()).isEqualTo(2);
    }
}
