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
        // full at start: 100 at once, then one every 10 ms
        assertThat(admittedInOneInterval(limiter, clock, true)).isEqualTo(100 + 99);
        // now at 50 per second, and the bucket was empty when the rate fell: one every 20 ms
        long admitted = admittedInOneInterval(limiter, clock, false);
        assertThat(admitted).isBetween(49L, 50L);
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
        assertThatThrownBy(() -> AdaptiveLimiter.builder().build()).hasMessage("ceiling must be >= 1, got 0");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).floor(20).build())
                .hasMessage("floor must be between 1 and the ceiling 10, got 20");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).decrease(1.5).build())
                .hasMessage("decrease must be between 0 and 1, got 1.5");
        assertThatThrownBy(() -> AdaptiveLimiter.builder().ceiling(10).initial(11).build())
                .hasMessage("initial rate must be between the floor 1 and the ceiling 10, got 11");
    }
}
