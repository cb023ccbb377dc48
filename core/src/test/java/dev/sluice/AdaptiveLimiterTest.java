package dev.sluice;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class AdaptiveLimiterTest {
    private static final long MS = 1_000_000L;
    private static final long S = 1_000 * MS;

    private final ManualClock clock = new ManualClock(1_700_000_000L * S);

    private AdaptiveLimiter limiter() {
        return AdaptiveLimiter.builder().ceiling(100).floor(10).increase(10).decrease(0.5)
                .interval(Duration.ofSeconds(1)).latencyTarget(Duration.ofMillis(200)).clock(clock).build();
    }

    /** Offers a request every millisecond for one interval and counts what is admitted. */
    private static long admittedInOneInterval(AdaptiveLimiter limiter, ManualClock clock, boolean overloaded) {
        long admitted = 0;
        for (int ms = 0; ms < 1000; ms++) {
            if (limiter.tryAcquire().allowed()) {
                admitted++;
                if (overloaded) {
                    limiter.onOverload();
                } else {
                    limiter.onSuccess(Duration.ofMillis(20));
                }
            }
            clock.advanceNanos(MS);
        }
        return admitted;
    }

    @Test
    void backsOffToTheFloorWithinFourOverloadedIntervalsAndRecoversWithinNine() {
        AdaptiveLimiter limiter = limiter();
        List<Long> rates = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            admittedInOneInterval(limiter, clock, true);
            rates.add(limiter.rate());
        }
        // 100 · 0.5^k, not below 10: ceil(log(10/100) / log(0.5)) = 4 intervals
        assertThat(rates).containsExactly(50L, 25L, 12L, 10L);
        rates.clear();
        for (int i = 0; i < 9; i++) {
            admittedInOneInterval(limiter, clock, false);
            rates.add(limiter.rate());
        }
        // (100 − 10) / 10 = 9 healthy intervals back to the ceiling
        assertThat(rates).containsExactly(20L, 30L, 40L, 50L, 60L, 70L, 80L, 90L, 100L);
    }

    @Test
    void admitsAtTheCurrentRate() {
        AdaptiveLimiter limiter = limiter();
        // full at start: the first at 0 ms, whose overload halves the rate at once (a past weakness: the fall waited
        // for the interval's end, and 199 were admitted); the 50 held at the new capacity, one a millisecond at 1 to
        // 52 ms while one comes back every 20 ms (52 − 51 · 0.05 = 49.45 taken at 52 ms), then one every 20 ms from
        // 61 ms, when 49 are taken again, to 981 ms: 1 + 52 + 47
        assertThat(admittedInOneInterval(limiter, clock, true)).isEqualTo(1 + 52 + 47);
        assertThat(limiter.rate()).as("lowered at the signal, not again at the end").isEqualTo(50);
        // at 50 per second, 0.95 come back by 1000 ms: one at 1001 ms, then one every 20 ms to 1981 ms
        long admitted = admittedInOneInterval(limiter, clock, false);
        assertThat(admitted).isEqualTo(50);
        assertThat(limiter.rate()).isEqualTo(60);
    }

    @Test
    void decidesExactlyLikeATokenBucket() {
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(3).clock(clock).build();
        for (int i = 0; i < 3; i++) {
            assertThat(limiter.tryAcquire().remaining()).isEqualTo(2 - i);
        }
        Decision rejected = limiter.tryAcquire();
        assertThat(rejected.allowed()).isFalse();
        assertThat(rejected.retryAfterNanos()).isEqualTo(333_333_334L);
        assertThat(rejected.resetAfterNanos()).isEqualTo(S);
        assertThat(limiter.tryAcquire(4).never()).isTrue();
    }

    /** Past bug: a fall of the rate took the lost capacity from the tokens held, not from those above it. */
    @Test
    void aFallingRateKeepsTheTokensHeldUpToTheNewCapacity() {
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(100).interval(Duration.ofMillis(100)).clock(clock)
                .build();
        assertThat(limiter.tryAcquire(80).remaining()).isEqualTo(20);
        limiter.onOverload();
        // the rate halves to 50 at the signal, which still holds the 20
        assertThat(limiter.tryAcquire(0).remaining()).isEqualTo(20);
        clock.advanceNanos(100 * MS);
        // 20 held + 5 refilled in the interval at 50/s; a congested interval ends without a rise
        Decision after = limiter.tryAcquire();
        assertThat(after.allowed()).isTrue();
        assertThat(after.remaining()).isEqualTo(24);
        assertThat(after.limit()).isEqualTo(Limit.of(50, S));
        assertThat(limiter.tryAcquire(25).allowed()).isFalse();
        // tokens above the new capacity are dropped (held as they were, 100 would be left): full, then a fall
        clock.advanceNanos(S);
        limiter.onOverload();
        clock.advanceNanos(100 * MS);
        // back to 100 five healthy intervals after the fall, full long since; then halved to 50, full at 50
        assertThat(limiter.rate()).isEqualTo(50);
        assertThat(limiter.tryAcquire(0).remaining()).isEqualTo(50);
    }

    /**
     * "If nothing else arrived" the rate climbs an increase an interval, so a wait is worked out along that climb:
     * at 1/s, a second request fits after 100 ms, when the rate is 2/s and the first token has drained a tenth.
     */
    @Test
    void waitsFollowTheRateAsItClimbs() {
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(10).initial(1).increase(1)
                .interval(Duration.ofMillis(100)).clock(clock).build();
        Decision first = limiter.tryAcquire();
        assertThat(first.allowed()).isTrue();
        // drained 1/10, 2/10, 3/10, 4/10 of the token in the four intervals at 1, 2, 3, 4 per second
        assertThat(first.resetAfterNanos()).isEqualTo(400 * MS);
        Decision second = limiter.tryAcquire();
        assertThat(second.allowed()).isFalse();
        assertThat(second.retryAfterNanos()).isEqualTo(100 * MS);
        clock.advanceNanos(100 * MS - 1);
        assertThat(limiter.tryAcquire().allowed()).as("a nanosecond early").isFalse();
        clock.advanceNanos(1);
        assertThat(limiter.tryAcquire().allowed()).isTrue();

        // a cost above the rate but within the ceiling waits for the rate to reach it: 2 → 5 in three ends
        AdaptiveLimiter climbing = AdaptiveLimiter.builder().ceiling(10).initial(2).increase(1)
                .interval(Duration.ofMillis(100)).clock(clock).build();
        Decision five = climbing.tryAcquire(5);
        assertThat(five.never()).isFalse();
        assertThat(five.retryAfterNanos()).isEqualTo(300 * MS);
        assertThat(climbing.tryAcquire(11).never()).as("above the ceiling no rate admits it").isTrue();
        clock.advanceNanos(300 * MS - 1);
        assertThat(climbing.tryAcquire(5).allowed()).isFalse();
        clock.advanceNanos(1);
        assertThat(climbing.tryAcquire(5).allowed()).isTrue();
    }

    /** A past bug: a wait of many long intervals wrapped past 2^63 ns to a negative retry_after. */
    @Test
    void aWaitPastWhatALongHoldsIsTheLongestNotNegative() {
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(200_000).floor(1).initial(1).increase(1)
                .interval(Duration.ofDays(1)).clock(clock).build();
        // 149,999 rises of one a day: the first interval's end and 149,998 days more, past 2^63 ns (106,751 days)
        Decision far = limiter.tryAcquire(150_000);
        assertThat(far.allowed()).isFalse();
        assertThat(far.never()).isFalse();
        assertThat(far.retryAfterNanos()).isEqualTo(Long.MAX_VALUE);
        // inside a long: 100,000 rises, at the end of the 100,000th day
        assertThat(limiter.tryAcquire(100_001).retryAfterNanos()).isEqualTo(100_000L * 86_400 * S);
    }

    /** A clock past the times a rule decides at is refused, where now + interval wrapped and the limiter looped. */
    @Test
    void refusesATimeBeyondWhatItDecides() {
        ManualClock far = new ManualClock(Long.MAX_VALUE - 10);
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).clock(far).build())
                .hasMessage("time must be between 0 and " + (1L << 62) + "ns since the epoch, got "
                        + (Long.MAX_VALUE - 10) + "ns");
        ManualClock late = new ManualClock((1L << 62) - S);
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(10).clock(late).build();
        assertThat(limiter.tryAcquire().allowed()).isTrue();
        late.advanceNanos(2 * S);
        assertThatThrownBy(limiter::tryAcquire).hasMessageStartingWith("time must be between 0 and ");
        assertThatThrownBy(limiter::onOverload).hasMessageStartingWith("time must be between 0 and ");
    }

    /** Congestion already seen in this interval lowered the rate and holds it at its end, and the wait knows it. */
    @Test
    void aWaitKnowsTheFallAlreadySignalled() {
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(100).increase(10).interval(Duration.ofMillis(100))
                .clock(clock).build();
        assertThat(limiter.tryAcquire(100).allowed()).isTrue();
        limiter.onOverload();
        // the rate halved to 50 at the signal, none held; tokens held: 5 at 100 ms, where the congested interval ends
        // without a rise; 10 at 200 ms, where a rise to 60 adds its room, 20; 26 at 300 ms, 36 at 70/s; 43 at 400 ms,
        // 53 at 80/s; the last 7 take 87.5 ms: 487.5 ms
        Decision sixty = limiter.tryAcquire(60);
        assertThat(sixty.retryAfterNanos()).isEqualTo(487_500_000L);
        clock.advanceNanos(487_500_000L - 1);
        assertThat(limiter.tryAcquire(60).allowed()).isFalse();
        clock.advanceNanos(1);
        assertThat(limiter.tryAcquire(60).allowed()).isTrue();
    }

    @Test
    void slowSuccessesAndErrorsCountAsCongestion() {
        AdaptiveLimiter limiter = limiter();
        limiter.onSuccess(Duration.ofMillis(201));
        clock.advanceNanos(S);
        assertThat(limiter.rate()).isEqualTo(50);
        limiter.onError();
        clock.advanceNanos(S);
        assertThat(limiter.rate()).isEqualTo(25);
        limiter.onSuccess(Duration.ofMillis(200));
        clock.advanceNanos(S);
        assertThat(limiter.rate()).isEqualTo(35);
        clock.advanceNanos(3600 * S);
        assertThat(limiter.rate()).as("a quiet hour is healthy").isEqualTo(100);
    }

    @Test
    void refusesBadParameters() {
        assertThatThrownBy(() -> AdaptiveLimiter.builder().build())
                .hasMessage("ceiling must be between 1 and 1099511627776, got 0");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(1L << 41).period(Duration.ofNanos(1)).build())
                .hasMessage("ceiling must be between 1 and 1099511627776, got 2199023255552");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(1).period(Duration.ofDays(4000)).build())
                .hasMessageStartingWith("period and interval must be at most 3335d");
        // a past bug: exactly 2^62 was accepted, and the level wrapped: four requests of 2^31 admitted in a bucket of one
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(1L << 31).period(Duration.ofNanos(1L << 31)).build())
                .hasMessage("ceiling × period must be below 2^62, got 2147483648 per 2147483648ns");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).latencyTarget(Duration.ofSeconds(-1)))
                .hasMessage("latency target must be >= 0, got PT-1S");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().clock(null)).hasMessage("clock must not be null");
        AdaptiveLimiter limiter = AdaptiveLimiter.builder().ceiling(10).build();
        assertThatThrownBy(() -> limiter.onSuccess(Duration.ofSeconds(-5))).hasMessage("latency must be >= 0, got PT-5S");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).floor(20).build())
                .hasMessage("floor must be between 1 and the ceiling 10, got 20");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).increase(0).build())
                .hasMessage("increase must be >= 1, got 0");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).increase(-1).build())
                .hasMessage("increase must be >= 1, got -1");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).decrease(1.5).build())
                .hasMessage("decrease must be between 0 and 1, got 1.5");
        // a review found a period of an hour with intervals of a microsecond accepted: 3.6·10^9 steps under the lock
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).period(Duration.ofHours(1))
                .interval(Duration.ofNanos(1_000)).build())
                .hasMessage("interval must be at least period / 10000000, got 1us for a period of 1h");
        assertThat(AdaptiveLimiter.builder().ceiling(10).period(Duration.ofSeconds(10)).interval(Duration.ofNanos(1_000))
                .build().rate()).as("a ten-millionth of the period").isEqualTo(10);
        assertThat(AdaptiveLimiter.builder().ceiling(10).period(Duration.ofDays(30)).build().rate())
                .as("a month at the default interval").isEqualTo(10);
        // a product past 2^63 wrapped to a negative number and passed (a review found it)
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(1L << 32).period(Duration.ofNanos(1L << 31)).build())
                .hasMessage("ceiling × period must be below 2^62, got 4294967296 per 2147483648ns");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).initial(11).build())
                .hasMessage("initial rate must be between the floor 1 and the ceiling 10, got 11");
    }
}
