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
        // three of 3/1s, then rejected until the window after next weighs the three at 2: P − ⌊2P/3⌋ into it
        long[][] expected = {{1, 2, 0}, {1, 1, 0}, {1, 0, 0}, {0, 0, S + 333_333_334L}, {0, 0, S + 333_333_334L}};
        for (long[] step : expected) {
            Decision decided = sync.tryAcquire("k");
            assertThat(new long[] {decided.allowed() ? 1 : 0, decided.remaining(), decided.retryAfterNanos()})
                    .isEqualTo(step);
            CompletableFuture<Decision> answer = async.tryAcquireAsync("k").toCompletableFuture();
            assertThat(answer).isCompletedWithValue(decided);
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

    /**
     * A review found: with the budget counted on the clock alone, a clock the sleep does not move (a manual one, a
     * sleeper that does nothing) brought the same rejection back for ever. The waits asked for count too.
     */
    @Test
    void acquireEndsWhenItsSleepsDoNotMoveTheClock() {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1/1s").clock(clock)
                .sleeper(nanos -> { }).build();
        limiter.tryAcquire("k");
        Decision gaveUp = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(Duration.ofSeconds(5),
                () -> limiter.acquire("k", Duration.ofSeconds(3)));
        assertThat(gaveUp.allowed()).isFalse();
    }

    /** Found by trying the library: a null here reached the caller as the JDK's NullPointerException. */
    @Test
    void nullArgumentsAreRefusedNamingWhatIsMissing() {
        RateLimiter limiter = limiter(Algorithm.GCRA, "1/1s").build();
        assertThatThrownBy(() -> limiter.reset(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("key must not be empty");
        assertThatThrownBy(() -> RateLimiter.builder().rule(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("rule must not be null");
        assertThatThrownBy(() -> dev.sluice.store.InMemoryStore.builder().outOfOrder(null))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("out-of-order skew must not be null");
        assertThatThrownBy(() -> clock.advance(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("duration must not be null");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().period(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("period must not be null");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().interval(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("interval must not be null");
    }

    /**
     * A bug found by trying the library: acquire took each retry_after it slept from its budget, not the time that
     * passed, so sleeps that ended late added up past maxWait (242 ms of 200 ms here: each sleep ends 2 ms late,
     * and another caller takes each unit that leaks). It now counts on the clock, and gives up within maxWait.
     */
    @Test
    void acquireGivesUpWithinMaxWaitWhenItsSleepsEndLate() throws InterruptedException {
        RateLimiter[] limiter = new RateLimiter[1];
        Sleeper late = nanos -> {
            clock.advanceNanos(nanos + 2 * MS);
            limiter[0].tryAcquire("k");
        };
        limiter[0] = limiter(Algorithm.LEAKY_BUCKET, "100/1s").sleeper(late).build();
        limiter[0].tryAcquire("k", 100);
        long start = clock.nanos();
        Decision gaveUp = limiter[0].acquire("k", 1, Duration.ofMillis(200));
        assertThat(gaveUp.allowed()).isFalse();
        // the last sleep, which ends at maxWait, ends 2 ms late like the others: no more than that
        assertThat(clock.nanos() - start).as("waited within maxWait and one late wake").isLessThanOrEqualTo(202 * MS);
    }

    @Test
    void acquireWaitsForTheNextWindowWhenItCannotReserve() throws InterruptedException {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "2/1s").build();
        limiter.tryAcquire("k", 2);
        clock.advanceNanos(200 * MS);
        Decision gaveUp = limiter.acquire("k", Duration.ofMillis(500));
        assertThat(gaveUp.allowed()).as("800 ms away").isFalse();
        assertThat(gaveUp.retryAfterNanos()).as("the wait beyond maxWait, as gcra's").isEqualTo(300 * MS);
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
        // a review found an interrupted thread charged first, its sleep then throwing at once: nothing is reserved
        RateLimiter other = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1h").build();
        other.tryAcquire("j");
        Thread.currentThread().interrupt();
        assertThatThrownBy(() -> other.acquire("j", Duration.ofHours(2))).isInstanceOf(InterruptedException.class);
        assertThat(other.tryAcquire("j").retryAfterNanos()).as("nothing reserved: the next turn is within the hour")
                .isLessThanOrEqualTo(java.util.concurrent.TimeUnit.HOURS.toNanos(1));
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

    /**
     * A past weakness: a caller interrupted while it held a delayed request was heard as delayed only, so a count of
     * requests that went ahead counted it. It is heard abandoned too; its cost stays taken.
     */
    @Test
    void anInterruptedHoldIsHeardAbandoned() {
        List<String> heard = new ArrayList<>();
        DecisionListener recorder = new DecisionListener() {
            @Override
            public void delayed(String key, long cost, Decision decision) {
                heard.add("delayed " + key + " " + decision.delayNanos() / MS + "ms");
            }

            @Override
            public void abandoned(String key, long cost, Decision decision) {
                heard.add("abandoned " + key + " " + decision.delayNanos() / MS + "ms");
            }
        };
        Sleeper interrupted = nanos -> {
            throw new InterruptedException("the caller stopped");
        };
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("2/1s").clock(clock)
                .sleeper(interrupted).listener(recorder).build();
        assertThat(limiter.tryAcquire("k", 2).allowed()).isTrue();
        assertThatThrownBy(() -> limiter.acquire("k", Duration.ofSeconds(1))).isInstanceOf(InterruptedException.class)
                .hasMessage("the caller stopped");
        assertThat(heard).containsExactly("delayed k 500ms", "abandoned k 500ms");
        assertThat(limiter.tryAcquire("k", 0).retryAfterNanos()).as("the reservation stands").isZero();
        assertThat(limiter.tryAcquire("k").retryAfterNanos()).isEqualTo(S);
    }

    /** A past bug: a maxWait of 0 on a rule in delay mode slept the rule's own max delay. */
    @Test
    void acquireWithNoTimeToWaitNeverWaitsWhateverTheRulesDelayMode() throws InterruptedException {
        RateLimiter limiter = RateLimiter.builder().limit("1/1s").delay(Duration.ofSeconds(2)).clock(clock)
                .sleeper(Sleeper.advancing(clock)).build();
        assertThat(limiter.acquire("k", Duration.ZERO).allowed()).isTrue();
        Decision notNow = limiter.acquire("k", Duration.ZERO);
        assertThat(notNow.allowed()).isFalse();
        assertThat(notNow.retryAfterNanos()).isEqualTo(S);
        assertThat(clock.nanos()).as("nothing slept").isEqualTo(T0);
        // with time to wait, the shorter of maxWait and the rule's own max delay
        Decision waited = limiter.acquire("k", Duration.ofSeconds(5));
        assertThat(waited.allowed()).isTrue();
        assertThat(waited.delayNanos()).isEqualTo(S);
        // reserved up to T0 + 2 s: at T0 + 1 s the next waits 1 s, 500 ms beyond a maxWait of 500 ms
        assertThat(limiter.acquire("k", Duration.ofMillis(500)).retryAfterNanos()).isEqualTo(S / 2);
    }

    /**
     * A shaping acquire that waits for room asks again with what is left of maxWait, rounded to a 64th of it: a store
     * keeps what it works out per rule, and a review counted 202 rules in 200 calls when each nanosecond left made one.
     */
    @Test
    void aShapingAcquireThatWaitsForRoomAsksTheStoreFewRules() throws InterruptedException {
        java.util.Set<dev.sluice.algorithm.Rule> rules = java.util.concurrent.ConcurrentHashMap.newKeySet();
        dev.sluice.store.Store memory = dev.sluice.store.InMemoryStore.builder().clock(clock).build();
        dev.sluice.store.Store recording = (dev.sluice.store.Store) java.lang.reflect.Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {dev.sluice.store.Store.class}, (proxy, method, args) -> {
                    for (Object argument : args == null ? new Object[0] : args) {
                        if (argument instanceof dev.sluice.algorithm.Rule rule) {
                            rules.add(rule);
                        }
                    }
                    try {
                        return method.invoke(memory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        RateLimiter limiter = limiter(Algorithm.LEAKY_BUCKET, "3/1s burst=3").mode(Mode.SHAPING).store(recording)
                .build();
        for (int i = 0; i < 200; i++) {
            clock.advance(Duration.ofNanos(7_919_993L * i % 400_000_000L)); // the queue found at a different level each time
            while (limiter.tryAcquire("k").allowed()) {
                // others fill the queue
            }
            long start = clock.nanos();
            Decision admitted = limiter.acquire("k", Duration.ofSeconds(2));
            assertThat(admitted.allowed()).isTrue();
            assertThat(clock.nanos() - start).as("within maxWait").isLessThanOrEqualTo(2 * S);
        }
        assertThat(rules).as("the rule, and at most 66 for one maxWait").hasSizeLessThanOrEqualTo(67);
    }

    /** "Wait forever" is as long as the rule can ask, not an error about a delay mode the caller never set. */
    @Test
    void aMaxWaitBeyondAnyWaitIsTakenAsTheLongest() throws InterruptedException {
        RateLimiter limiter = limiter(Algorithm.TOKEN_BUCKET, "1/1s").build();
        limiter.tryAcquire("k");
        assertThat(limiter.acquire("k", Duration.ofDays(3650)).delayNanos()).isEqualTo(S);
        assertThat(limiter.acquire("k", Duration.ofSeconds(Long.MAX_VALUE)).delayNanos()).isEqualTo(S);
        RateLimiter interval = RateLimiter.builder().limit(Limit.parse("1099511627776/1ms refill=interval"))
                .clock(clock).sleeper(Sleeper.advancing(clock)).build();
        assertThat(interval.acquire("k", 1, Duration.ofDays(1)).allowed()).isTrue();
        assertThatThrownBy(() -> limiter.acquire("k", Duration.ofSeconds(-1))).hasMessage("maxWait must be >= 0, got PT-1S");
        assertThatThrownBy(() -> limiter.acquire("k", null)).hasMessage("maxWait must be >= 0, got null");
    }

    /**
     * A past bug: a limiter's clock was read before the key was looked up, so a sweep by another thread at a later
     * reading could drop the key in between, and the key was decided as fresh at the earlier time: 3 in a window of
     * 2. Here reading the clock runs such a sweep, as another thread would just after this one read it.
     */
    @Test
    void aKeySweptBetweenReadingTheLimitersClockAndFindingTheKeyIsNotDecidedAsFresh() {
        AtomicReference<Runnable> onNextRead = new AtomicReference<>();
        Clock sweeping = () -> {
            long now = clock.nanos();
            Runnable sweep = onNextRead.getAndSet(null);
            if (sweep != null) {
                sweep.run();
            }
            return now;
        };
        dev.sluice.store.InMemoryStore store = new dev.sluice.store.InMemoryStore();
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("2/1s").store(store)
                .clock(sweeping).build();
        clock.set(T0 + S / 2);
        assertThat(limiter.tryAcquire("k", 2).allowed()).isTrue();
        assertThat(limiter.tryAcquire("j", 2).allowed()).isTrue();
        clock.set(T0 + 999 * MS);
        onNextRead.set(() -> store.cleanUp(T0 + S)); // "k" and "j" are untouched from T0 + 1 s
        Decision late = limiter.tryAcquire("k");
        assertThat(late.allowed()).as("2/1s is used up until T0 + 1 s").isFalse();
        assertThat(late.retryAfterNanos()).isEqualTo(MS);
        assertThat(store.size()).as("the sweep dropped both").isZero();
        // the same through the async face, on a key of its own (the sweep above has dropped "k" for good)
        clock.set(T0 + 2 * S + S / 2);
        assertThat(limiter.tryAcquire("j", 2).allowed()).isTrue();
        clock.set(T0 + 2 * S + 999 * MS);
        onNextRead.set(() -> store.cleanUp(T0 + 3 * S));
        assertThat(limiter.tryAcquireAsync("j").toCompletableFuture().join().allowed()).as("async alike").isFalse();
    }

    @Test
    void nullsAreRefusedWhereTheyAreGiven() {
        assertThatThrownBy(() -> RateLimiter.builder().limit((Limit) null)).hasMessage("limit must not be null");
        assertThatThrownBy(() -> RateLimiter.builder().limit((String) null))
                .hasMessage("bad limit: null; expected L/P such as 600/1m");
        assertThatThrownBy(() -> RateLimiter.builder().delay(null)).hasMessage("delay mode needs a max delay, got null");
        assertThatThrownBy(() -> RateLimiter.builder().sleeper(null)).hasMessage("sleeper must not be null");
        assertThatThrownBy(() -> RateLimiter.builder().store(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("store must not be null");
        assertThatThrownBy(() -> RateLimiter.builder().listener(null)).hasMessage("listener must not be null");
        org.assertj.core.api.Assertions.assertThatCode(() -> RateLimiter.builder().delay(Duration.ofSeconds(Long.MAX_VALUE)))
                .doesNotThrowAnyException();
        assertThatThrownBy(() -> RateLimiter.builder().limit("1/1s").delay(Duration.ofSeconds(Long.MAX_VALUE)).build())
                .hasMessageStartingWith("delay mode needs a max delay of at most");
    }

    /** Two rules on one key of one store: a clear error, not a ClassCastException from inside an algorithm. */
    @Test
    void twoRulesOfDifferentAlgorithmsOnOneKeyAreToldApart() {
        dev.sluice.store.InMemoryStore store = new dev.sluice.store.InMemoryStore();
        RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1s").store(store).clock(clock).build().tryAcquire("k");
        RateLimiter other = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1/1s").store(store)
                .clock(clock).build();
        assertThatThrownBy(() -> other.tryAcquire("k")).isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("the key's state was made by another rule than fixed-window");
    }
}
