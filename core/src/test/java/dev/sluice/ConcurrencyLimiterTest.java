package dev.sluice;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConcurrencyLimiterTest {
    private static final long S = 1_000_000_000L;

    private final ManualClock clock = new ManualClock(1_700_000_000L * S);

    private ConcurrencyLimiter limiter(long limit) {
        return ConcurrencyLimiter.builder().limit(limit).leaseTimeout(Duration.ofSeconds(30)).clock(clock).build();
    }

    /**
     * Found by trying the library: a clock past the times a rule decides at made now + the lease overflow, every
     * lease expired at once, and ten permits of a limit of two were granted. A time outside [0, 2^62] is refused,
     * naming it, as the rate limiter refuses it; so is a null key.
     */
    @Test
    void refusesATimeOutsideWhatARuleDecidesAtAndANullKey() {
        for (long bad : new long[] {Long.MAX_VALUE - 1000, -1}) {
            ConcurrencyLimiter far = ConcurrencyLimiter.builder().limit(2).clock(() -> bad).build();
            assertThatThrownBy(() -> far.tryAcquire("k")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("time must be between 0 and 4611686018427387904ns since the epoch, got " + bad + "ns");
            assertThatThrownBy(() -> far.inFlight("k")).hasMessageStartingWith("time must be between 0 and");
            assertThat(far.keyCount()).isZero();
        }
        assertThatThrownBy(() -> limiter(2).inFlight(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("key must not be null");
    }

    @Test
    void grantsUpToTheLimitAndTakesCapacityBackOnClose() {
        ConcurrencyLimiter limiter = limiter(3);
        Permit two = limiter.tryAcquire("k", 2);
        assertThat(two.granted()).isTrue();
        assertThat(two.decision().remaining()).isEqualTo(1);
        clock.advanceNanos(10 * S);
        Permit one = limiter.tryAcquire("k");
        assertThat(one.decision().remaining()).isZero();
        Permit refused = limiter.tryAcquire("k");
        assertThat(refused.granted()).isFalse();
        // if nobody closes, the first lease expires in 20 s and makes room
        assertThat(refused.decision().retryAfterNanos()).isEqualTo(20 * S);
        assertThat(limiter.tryAcquire("k", 4).decision().never()).isTrue();
        refused.close();
        assertThat(limiter.inFlight("k")).isEqualTo(3);
        // from a review: an empty key answered 0, where every other call refuses it
        assertThatThrownBy(() -> limiter.inFlight("")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("key must not be empty");
        two.close();
        two.close();
        assertThat(limiter.inFlight("k")).isEqualTo(1);
        one.close();
        assertThat(limiter.inFlight("k")).isZero();
        assertThat(limiter.keyCount()).isZero();
    }

    @Test
    void aLeaseNeverClosedExpiresAndClosingItLaterFreesNothingElse() {
        ConcurrencyLimiter limiter = limiter(1);
        Permit forgotten = limiter.tryAcquire("k");
        clock.advanceNanos(30 * S);
        Permit next = limiter.tryAcquire("k");
        assertThat(next.granted()).as("the forgotten lease has expired").isTrue();
        forgotten.close();
        assertThat(limiter.inFlight("k")).isEqualTo(1);
        assertThat(limiter.tryAcquire("k").granted()).isFalse();
    }

    /**
     * A review found a key whose leases expired unreleased kept for good unless it was asked again: a client sending
     * a new key with each request grew the map without end. A sweep, once the keys have doubled, drops them.
     */
    @Test
    void keysWhoseLeasesExpireUnreleasedAreSwept() {
        ConcurrencyLimiter limiter = ConcurrencyLimiter.builder().limit(1).leaseTimeout(Duration.ofSeconds(1))
                .clock(clock).build();
        for (int i = 0; i < 3_000; i++) {
            assertThat(limiter.tryAcquire("gone-" + i).granted()).isTrue(); // never closed
        }
        assertThat(limiter.keyCount()).as("held: nothing to sweep yet").isEqualTo(3_000);
        clock.advance(Duration.ofSeconds(2));
        for (int i = 3_000; i < 4_200; i++) {
            assertThat(limiter.tryAcquire("gone-" + i).granted()).isTrue();
        }
        // at 4,096 keys the expired 3,000 went; the 1,200 taken since are held
        assertThat(limiter.keyCount()).isEqualTo(1_200);
    }

    /**
     * A past bug, found by a review: sweeps drop expired leases only, so a client sending a new key with each request
     * and never releasing held a lease a key until the server ran out of memory. At most {@code maxPlaces} leases are
     * held over all keys; full, a new one is turned away, with the wait until the first lease held expires; a lease
     * given back, or one expired, makes room again.
     */
    @Test
    void holdsAtMostMaxPlacesOverAllKeysAndTurnsTheRestAway() {
        ConcurrencyLimiter limiter = ConcurrencyLimiter.builder().limit(3).leaseTimeout(Duration.ofSeconds(30))
                .maxPlaces(5).clock(clock).build();
        List<Permit> held = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            held.add(limiter.tryAcquire("key-" + i));
            clock.advanceNanos(S);
        }
        held.add(limiter.tryAcquire("key-0"));
        assertThat(held).allMatch(Permit::granted).noneMatch(Permit::turnedAway);
        assertThat(limiter.placeCount()).isEqualTo(5);

        Permit newKey = limiter.tryAcquire("key-9");
        assertThat(newKey.granted()).isFalse();
        assertThat(newKey.turnedAway()).isTrue();
        // the first lease, taken 4 s ago, expires in 26 s; nothing is left while the limiter is full
        assertThat(newKey.decision()).isEqualTo(new Decision(false, 0, 26 * S, 0, 0, Limit.of(3, 30 * S)));
        Permit roomInItsKey = limiter.tryAcquire("key-1");
        assertThat(roomInItsKey.turnedAway()).as("its key has room, the limiter none").isTrue();
        assertThat(roomInItsKey.decision().remaining()).isZero();
        assertThat(limiter.tryAcquire("key-1", 4).turnedAway()).as("refused for its own limit first").isFalse();
        assertThat(limiter.tryAcquire("key-9", 0).granted()).as("a peek holds nothing").isTrue();
        assertThat(limiter.turnedAway()).isEqualTo(2);
        newKey.close();
        assertThat(limiter.placeCount()).as("a refusal gives nothing back").isEqualTo(5);

        held.get(2).close();
        assertThat(limiter.tryAcquire("key-9").granted()).as("a place given back").isTrue();
        assertThat(limiter.tryAcquire("key-8").turnedAway()).isTrue();
        clock.advanceNanos(26 * S); // key-0's first lease runs out
        Permit afterExpiry = limiter.tryAcquire("key-8");
        assertThat(afterExpiry.granted()).as("a lease expired").isTrue();
        assertThat(limiter.placeCount()).isEqualTo(5);
        assertThat(limiter.turnedAway()).isEqualTo(3);
        clock.advanceNanos(60 * S);
        assertThat(limiter.tryAcquire("key-7").granted()).isTrue();
        assertThat(limiter.placeCount()).as("every expired lease swept").isEqualTo(1);
        assertThat(limiter.keyCount()).isEqualTo(1);

        // a past bug, found by a review: a sweep that left no lease never let another sweep come, and the limiter,
        // full again, was full for good (retry_after 292 years)
        for (int i = 0; i < 4; i++) {
            clock.advanceNanos(S);
            assertThat(limiter.tryAcquire("again-" + i).granted()).isTrue();
        }
        Permit fullAgain = limiter.tryAcquire("again-9");
        assertThat(fullAgain.turnedAway()).isTrue();
        assertThat(fullAgain.decision().retryAfterNanos()).as("until key-7's lease, taken 4 s ago, runs out")
                .isEqualTo(26 * S);
        clock.advanceNanos(26 * S);
        assertThat(limiter.tryAcquire("again-9").granted()).isTrue();
    }

    /** Many threads taking leases on keys of their own never hold more than {@code maxPlaces} together. */
    @Test
    void manyThreadsNeverHoldMoreThanMaxPlaces() throws Exception {
        ConcurrencyLimiter limiter = ConcurrencyLimiter.builder().limit(2).maxPlaces(500).build();
        int threads = 8;
        CyclicBarrier start = new CyclicBarrier(threads);
        AtomicInteger granted = new AtomicInteger();
        AtomicInteger turnedAway = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> runs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            runs.add(pool.submit(() -> {
                start.await(1, TimeUnit.MINUTES);
                for (int i = 0; i < 200; i++) {
                    // never closed; a key's second lease is within its limit of 2 too
                    Permit permit = limiter.tryAcquire("t" + thread + "-" + (i % 150));
                    (permit.granted() ? granted : turnedAway).incrementAndGet();
                    assertThat(permit.granted() || permit.turnedAway()).as("refused only for room").isTrue();
                }
                return null;
            }));
        }
        for (Future<?> run : runs) {
            run.get(1, TimeUnit.MINUTES);
        }
        pool.shutdown();
        assertThat(granted.get()).isEqualTo(500);
        assertThat(limiter.placeCount()).isEqualTo(500);
        assertThat(limiter.turnedAway()).isEqualTo(turnedAway.get()).isEqualTo(threads * 200L - 500);
    }

    @Test
    void costZeroIsAPeekThatHoldsNothing() {
        ConcurrencyLimiter limiter = limiter(3);
        Permit untouched = limiter.tryAcquire("k", 0);
        assertThat(untouched.decision()).isEqualTo(new Decision(true, 3, 0, 0, 0, Limit.of(3, 30 * S)));
        assertThat(limiter.keyCount()).as("a peek makes no key").isZero();
        Permit two = limiter.tryAcquire("k", 2);
        clock.advanceNanos(10 * S);
        Permit peek = limiter.tryAcquire("k", 0);
        assertThat(peek.granted()).isTrue();
        assertThat(peek.decision().remaining()).isEqualTo(1);
        assertThat(peek.decision().resetAfterNanos()).as("the lease held runs out in 20 s").isEqualTo(20 * S);
        peek.close();
        assertThat(limiter.inFlight("k")).as("closing a peek gives nothing back").isEqualTo(2);
        two.close();
        assertThat(limiter.inFlight("k")).isZero();
    }

    @Test
    void worksWithTryWithResources() {
        ConcurrencyLimiter limiter = limiter(1);
        try (Permit permit = limiter.tryAcquire("k")) {
            assertThat(permit.granted()).isTrue();
            assertThat(limiter.tryAcquire("k").granted()).isFalse();
        }
        assertThat(limiter.tryAcquire("k").granted()).isTrue();
    }

    @Test
    void manyThreadsNeverHoldMoreThanTheLimit() throws Exception {
        // in each round 8 threads race for 4 places and hold what they got until all 8 have asked: exactly 4
        // are granted every round (more would break the limit, fewer would be a place lost or a spurious refusal)
        ConcurrencyLimiter limiter = ConcurrencyLimiter.builder().limit(4).build();
        int threads = 8;
        int rounds = 1_000;
        CyclicBarrier ask = new CyclicBarrier(threads);
        CyclicBarrier asked = new CyclicBarrier(threads);
        AtomicIntegerArray granted = new AtomicIntegerArray(rounds);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> runs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            runs.add(pool.submit(() -> {
                for (int round = 0; round < rounds; round++) {
                    ask.await(1, TimeUnit.MINUTES);
                    try (Permit permit = limiter.tryAcquire("k")) {
                        if (permit.granted()) {
                            granted.incrementAndGet(round);
                        }
                        asked.await(1, TimeUnit.MINUTES);
                    }
                }
                return null;
            }));
        }
        for (Future<?> run : runs) {
            run.get(2, TimeUnit.MINUTES);
        }
        pool.shutdown();
        for (int round = 0; round < rounds; round++) {
            assertThat(granted.get(round)).as("round %d", round).isEqualTo(4);
        }
        assertThat(limiter.inFlight("k")).isZero();
        assertThat(limiter.keyCount()).isZero();
    }

    @Test
    void refusesBadSettings() {
        assertThatThrownBy(() -> ConcurrencyLimiter.builder().build()).hasMessage("limit must be between 1 and 1099511627776, got 0");
        assertThatThrownBy(() -> limiter(2).tryAcquire("k", -1)).hasMessage("cost must be a whole number >= 0, got -1");
        assertThatThrownBy(() -> ConcurrencyLimiter.builder().limit(1).maxPlaces(0).build())
                .hasMessage("max places must be at least 1, got 0");
    }
}
