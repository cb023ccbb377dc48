package dev.sluice;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ManualClockTest {
    @Test
    void movesOnlyForwardAndOnlyWhenTold() {
        ManualClock clock = new ManualClock(100);
        assertThat(clock.nanos()).isEqualTo(100);
        clock.advance(Duration.ofNanos(5));
        clock.set(200);
        assertThat(clock.nanos()).isEqualTo(200);
        assertThatThrownBy(() -> clock.set(199)).hasMessage("time may not go backwards: 199ns is before 200ns");
        assertThatThrownBy(() -> clock.advanceNanos(-1)).hasMessage("time may not go backwards: advance by -1ns");
        assertThat(clock.nanos()).isEqualTo(200);
        assertThatThrownBy(() -> new ManualClock(-1)).hasMessage("time must be >= 0ns since the epoch, got -1ns");
        // past the last nanosecond a long holds it would wrap to a time before the epoch: refused, unmoved
        assertThatThrownBy(() -> clock.advanceNanos(Long.MAX_VALUE)).hasMessage("time would pass the last nanosecond"
                + " a long holds: 200ns advanced by 9223372036854775807ns");
        assertThatThrownBy(() -> clock.advance(Duration.ofSeconds(Long.MAX_VALUE))).hasMessageStartingWith("time would pass");
        assertThat(clock.nanos()).isEqualTo(200);
    }

    /** The wall clock is read once: stepped back an hour (or on an hour), the clock goes on by the monotonic one. */
    @Test
    void theSystemClockReadsTheWallClockOnceAndThenCountsTheMonotonicOne() {
        java.util.concurrent.atomic.AtomicReference<java.time.Instant> wall =
                new java.util.concurrent.atomic.AtomicReference<>(java.time.Instant.ofEpochSecond(1_490_868_000L, 7));
        java.util.concurrent.atomic.AtomicLong monotonic = new java.util.concurrent.atomic.AtomicLong(-5_000);
        SystemClock clock = new SystemClock(wall::get, monotonic::get);
        assertThat(clock.nanos()).isEqualTo(1_490_868_000_000_000_007L);
        monotonic.addAndGet(250);
        wall.set(wall.get().minusSeconds(3_600));
        assertThat(clock.nanos()).as("stepped back: not followed").isEqualTo(1_490_868_000_000_000_257L);
        monotonic.addAndGet(1);
        wall.set(wall.get().plusSeconds(7_200));
        assertThat(clock.nanos()).as("stepped on: not followed").isEqualTo(1_490_868_000_000_000_258L);
        assertThat(clock.toNanoTime(1_490_868_000_000_001_007L)).isEqualTo(-4_000);
    }

    @Test
    void theSystemClockIsTheWallClockAndNeverGoesBack() {
        long wall = System.currentTimeMillis() * 1_000_000L;
        long first = Clock.system().nanos();
        assertThat(Math.abs(first - wall)).isLessThan(Duration.ofSeconds(5).toNanos());
        long previous = first;
        for (int i = 0; i < 10_000; i++) {
            long now = Clock.system().nanos();
            assertThat(now).isGreaterThanOrEqualTo(previous);
            previous = now;
        }
    }
}
