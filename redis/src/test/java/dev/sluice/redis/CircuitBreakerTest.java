package dev.sluice.redis;

import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

class CircuitBreakerTest {
    private final CircuitBreaker breaker = new CircuitBreaker(3, TimeUnit.SECONDS.toNanos(30));

    @Test
    void opensAfterThreeFailedCallsInARow() {
        assertThat(breaker.failed(new IllegalStateException("1"))).isFalse();
        assertThat(breaker.failed(new IllegalStateException("2"))).isFalse();
        assertThat(breaker.failed(new IllegalStateException("3"))).as("the third opens it").isTrue();
        assertThat(breaker.isOpen()).isTrue();
        assertThat(breaker.allows()).as("open for 30 s").isFalse();
    }

    @Test
    void aSuccessInBetweenStartsTheCountAgain() {
        breaker.failed(new IllegalStateException("1"));
        breaker.failed(new IllegalStateException("2"));
        breaker.succeeded();
        assertThat(breaker.failed(new IllegalStateException("3"))).isFalse();
        assertThat(breaker.isOpen()).isFalse();
    }

    /**
     * A bug a review found: the breaker counted decisions, and one batched call of 64 decisions that failed
     * opened it at once, after one failure of Redis instead of three.
     */
    @Test
    void theDecisionsOfOneFailedCallCountOnce() {
        IllegalStateException oneCall = new IllegalStateException("one call of 64 decisions");
        for (int i = 0; i < 64; i++) {
            assertThat(breaker.failed(oneCall)).isFalse();
        }
        assertThat(breaker.isOpen()).isFalse();
        breaker.failed(new IllegalStateException("2"));
        assertThat(breaker.failed(new IllegalStateException("3"))).isTrue();
    }

    /** Two calls failing at once on two connections: their decisions interleave, and still count two. */
    @Test
    void theDecisionsOfTwoCallsFailingTogetherCountTwice() {
        IllegalStateException one = new IllegalStateException("one call");
        IllegalStateException other = new IllegalStateException("another call");
        for (int i = 0; i < 32; i++) {
            breaker.failed(one);
            breaker.failed(other);
        }
        assertThat(breaker.isOpen()).isFalse();
        assertThat(breaker.failed(new IllegalStateException("a third"))).isTrue();
    }

    @Test
    void aFailedProbeOpensItAgainAndASuccessfulOneClosesIt() throws Exception {
        // open for a second: a pause of the test between a failed probe and the next ask must not outlast it
        CircuitBreaker quick = new CircuitBreaker(1, TimeUnit.SECONDS.toNanos(1));
        assertThat(quick.failed(new IllegalStateException("1"))).isTrue();
        Thread.sleep(1_050);
        assertThat(quick.allows()).as("the probe").isTrue();
        assertThat(quick.allows()).as("one probe at a time").isFalse();
        quick.failed(new IllegalStateException("probe failed"));
        assertThat(quick.isOpen()).isTrue();
        assertThat(quick.allows()).isFalse();
        Thread.sleep(1_050);
        assertThat(quick.allows()).isTrue();
        quick.succeeded();
        assertThat(quick.isOpen()).isFalse();
        assertThat(quick.allows()).isTrue();
    }
}
