package dev.sluice.algorithm;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import org.junit.jupiter.api.Test;


import static org.assertj.core.api.Assertions.assertThat;

/**
 * The fields of docs/algorithms.md (spec/algorithms.md) decision by decision, on {@link Rule#decide} without a store:
 * the boundaries and roundings a hand-made mutation run found no test pinning.
 */
class AlgorithmContractTest {
    private static final long S = 1_000_000_000L;
    private static final long M = 60 * S;
    private static final long H = 60 * M;
    private static final long T0 = 1_700_000_000L * S; // a multiple of 1s

    /** One key under one rule: its state carried from decision to decision. */
    private static final class Key {
        private final Rule rule;
        private KeyState state;

        Key(Algorithm algorithm, String... limits) {
            this.rule = Rule.of(algorithm, java.util.Arrays.stream(limits).map(Limit::parse).toList());
        }

        Decision decide(long t, long cost) {
            Outcome outcome = rule.decide(state, t, cost);
            state = outcome.next();
            return outcome.decision();
        }
    }

    /** fixed-window: reset_after = (w + 1)·P − t, but 0 while n_w = 0 (an untouched key, or a window rolled over). */
    @Test
    void fixedWindowResetAfterIsZeroWhileTheWindowIsEmpty() {
        Key key = new Key(Algorithm.FIXED_WINDOW, "10/1s");
        Decision peek = key.decide(T0 + 250_000_000L, 0);
        assertThat(peek.allowed()).isTrue();
        assertThat(peek.remaining()).isEqualTo(10);
        assertThat(peek.resetAfterNanos()).as("untouched").isZero();
        Decision never = key.decide(T0 + 250_000_000L, 11);
        assertThat(never.never()).isTrue();
        assertThat(never.resetAfterNanos()).as("still untouched").isZero();
        assertThat(key.decide(T0 + 250_000_000L, 10).resetAfterNanos()).isEqualTo(750_000_000L);
        Decision nextWindow = key.decide(T0 + 1_250_000_000L, 0);
        assertThat(nextWindow.remaining()).isEqualTo(10);
        assertThat(nextWindow.resetAfterNanos()).as("n_w = 0 in the new window").isZero();
    }

    /**
     * The seed of sliding-window: 100/1h, prev = 84, curr = 36, e = 15m: 84·0.75 + 36 = 99, a request admitted, the
     * next one at that instant rejected; its retry_after is the least wait after which it fits, 84·(45m − d)/60m ≤ 62.
     */
    @Test
    void slidingWindowSeedWeighsThePreviousWindowByWhatIsLeftOfIt() {
        Key key = new Key(Algorithm.SLIDING_WINDOW, "100/1h");
        assertThat(key.decide(10 * M, 84).remaining()).isEqualTo(16);
        long t = H + 15 * M;
        Decision weighed = key.decide(t, 0);
        assertThat(weighed.remaining()).as("floor(100 − 84·45/60)").isEqualTo(37);
        assertThat(weighed.resetAfterNanos()).as("the previous window weighs nothing from 2h").isEqualTo(45 * M);
        assertThat(key.decide(t, 36).remaining()).as("curr = 36: estimate 99").isEqualTo(1);
        Decision seed = key.decide(t, 1); // the seed's request: 99 + 1 <= 100
        assertThat(seed.allowed()).isTrue();
        assertThat(seed.remaining()).isZero();
        assertThat(seed.resetAfterNanos()).as("curr weighs nothing from 3h").isEqualTo(H + 45 * M);
        Decision next = key.decide(t, 1);
        assertThat(next.allowed()).isFalse();
        // d = 45m − floor(62·60m/84) = 2,700,000,000,000 − 2,657,142,857,142 ns
        assertThat(next.retryAfterNanos()).isEqualTo(42_857_142_858L);
        KeyState kept = key.state;
        assertThat(key.decide(t + 42_857_142_857L, 1).allowed()).as("1 ns before").isFalse();
        key.state = kept;
        assertThat(key.decide(t + 42_857_142_858L, 1).allowed()).isTrue();
    }

    /** A window skipped: n_{w−1} is the count of the window just before, 0 here, not of an older one. */
    @Test
    void slidingWindowForgetsAWindowTwoBack() {
        Key key = new Key(Algorithm.SLIDING_WINDOW, "100/1h");
        key.decide(10 * M, 84);
        Decision later = key.decide(2 * H + 15 * M, 0);
        assertThat(later.remaining()).isEqualTo(100);
        assertThat(later.resetAfterNanos()).isZero();
    }

    /**
     * gcra 3/1s: T = 333,333,333⅓ ns. After three at T0, TAT = T0 + 1 s; one more at T0 + 333,333,333 ns would make
     * new_tat − t = B·T + ⅓ ns: rejected, and admitted 1 ns later. reset_after rounds a fraction up, as every wait.
     */
    @Test
    void gcraKeepsTheThirdsOfANanosecond() {
        Key key = new Key(Algorithm.GCRA, "3/1s");
        Decision first = key.decide(T0, 1);
        assertThat(first.resetAfterNanos()).as("TAT − t = 333,333,333⅓ ns, rounded up").isEqualTo(333_333_334L);
        Decision almost = key.decide(T0 + 333_333_333L, 0);
        assertThat(almost.remaining()).isEqualTo(2);
        assertThat(almost.resetAfterNanos()).as("⅓ ns still to go").isEqualTo(1);
        assertThat(key.decide(T0 + 333_333_334L, 0).resetAfterNanos()).isZero();

        Key full = new Key(Algorithm.GCRA, "3/1s");
        assertThat(full.decide(T0, 3).allowed()).isTrue();
        Decision early = full.decide(T0 + 333_333_333L, 1);
        assertThat(early.allowed()).as("⅓ ns over B·T").isFalse();
        assertThat(early.retryAfterNanos()).isEqualTo(1);
        assertThat(full.decide(T0 + 333_333_334L, 1).allowed()).isTrue();
    }

    /** The seed of token-bucket, interval refill: 3 per 1m, first request at 10:00:00. */
    @Test
    void intervalRefillSeed() {
        Key key = new Key(Algorithm.TOKEN_BUCKET, "3/1m refill=interval");
        long ten = 10 * H;
        assertThat(key.decide(ten, 1).allowed()).isTrue();
        assertThat(key.decide(ten + 10 * S, 1).allowed()).isTrue();
        assertThat(key.decide(ten + 35 * S, 1).allowed()).isTrue();
        Decision rejected = key.decide(ten + 45 * S, 1);
        assertThat(rejected.allowed()).isFalse();
        assertThat(rejected.retryAfterNanos()).isEqualTo(15 * S);
        Decision refilled = key.decide(ten + M, 1);
        assertThat(refilled.allowed()).isTrue();
        assertThat(refilled.remaining()).isEqualTo(2);
    }

    /** A refill is capped at B: 1 token left and a refill of 3 make 3, not 4. */
    @Test
    void intervalRefillIsCappedAtTheCapacity() {
        Key key = new Key(Algorithm.TOKEN_BUCKET, "3/1m refill=interval");
        assertThat(key.decide(10 * H, 2).remaining()).isEqualTo(1);
        Decision afterRefill = key.decide(10 * H + M, 1);
        assertThat(afterRefill.allowed()).isTrue();
        assertThat(afterRefill.remaining()).isEqualTo(2);
    }

    /** Refills every P counted from the key's first admitted request, not from the epoch's minutes. */
    @Test
    void intervalRefillCountsFromTheFirstRequest() {
        Key key = new Key(Algorithm.TOKEN_BUCKET, "3/1m refill=interval");
        assertThat(key.decide(10 * H + 20 * S, 3).allowed()).isTrue();
        Decision onTheMinute = key.decide(10 * H + M, 1);
        assertThat(onTheMinute.allowed()).as("the refill is at 10:01:20").isFalse();
        assertThat(onTheMinute.retryAfterNanos()).isEqualTo(20 * S);
        assertThat(key.decide(10 * H + M + 20 * S, 1).remaining()).isEqualTo(2);
    }

    /** Several limits: one that can never admit the request rejects it (retry_after −1), and nothing is taken. */
    @Test
    void aLimitThatCanNeverAdmitRejectsWhateverTheOthersSay() {
        Key key = new Key(Algorithm.GCRA, "10/1s", "100/1m");
        Decision tooBig = key.decide(T0, 50);
        assertThat(tooBig.allowed()).isFalse();
        assertThat(tooBig.never()).isTrue();
        assertThat(key.state).as("nothing taken").isNull();
        assertThat(key.decide(T0, 0).remaining()).isEqualTo(10);
    }
}
