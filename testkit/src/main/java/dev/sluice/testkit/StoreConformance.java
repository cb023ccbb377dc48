package dev.sluice.testkit;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.ManualClock;
import dev.sluice.Mode;
import dev.sluice.RateLimiter;
import dev.sluice.Sleeper;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The contract of docs/algorithms.md as tests, for any {@link Store}: every example of the seeds, the
 * exact boundaries, and random traces checked decision for decision against the {@link ReferenceModel}.
 *
 * <p>A store's test module extends this class and says how to make a fresh store; nothing else changes.
 * Time is passed in by a {@link ManualClock}, so a store on a server (Redis) decides on the trace's time.
 */
public abstract class StoreConformance {
    protected static final long MS = 1_000_000L;
    protected static final long S = 1_000 * MS;
    protected static final long MIN = 60 * S;
    protected static final long H = 60 * MIN;
    /** 2017-03-30T10:00:00Z, the morning of the seeds' token bucket walk. */
    protected static final long TEN_O_CLOCK = 1_490_868_000L * S;

    /** A fresh, empty store. */
    protected abstract Store newStore();

    protected final ManualClock clock = new ManualClock(TEN_O_CLOCK);

    protected RateLimiter limiter(Algorithm algorithm, String... limits) {
        RateLimiter.Builder builder = RateLimiter.builder().algorithm(algorithm).store(newStore()).clock(clock);
        Arrays.stream(limits).forEach(builder::limit);
        return builder.build();
    }

    /** Checks the five fields of a decision at once, so a failure shows all of them. */
    protected static void expect(Decision decision, boolean allowed, long remaining, long retryAfterNanos,
                                 long resetAfterNanos, long delayNanos) {
        assertThat(fields(decision))
                .isEqualTo(fields(new Decision(allowed, remaining, retryAfterNanos, resetAfterNanos, delayNanos, null)));
    }

    private static String fields(Decision d) {
        return "allowed=" + d.allowed() + " remaining=" + d.remaining() + " retry_after=" + d.retryAfterNanos()
                + "ns reset_after=" + d.resetAfterNanos() + "ns delay=" + d.delayNanos() + "ns";
    }

    private void at(long nanos) {
        clock.set(nanos);
    }

    // ---------------------------------------------------------------- the seeds' examples

    @Test
    void tokenBucketIntervalRefillWalkOfTheSeeds() {
        RateLimiter limiter = limiter(Algorithm.TOKEN_BUCKET, "3/1m refill=interval");
        expect(limiter.tryAcquire("user_1"), true, 2, 0, 60 * S, 0);
        at(TEN_O_CLOCK + 10 * S);
        expect(limiter.tryAcquire("user_1"), true, 1, 0, 50 * S, 0);
        at(TEN_O_CLOCK + 35 * S);
        expect(limiter.tryAcquire("user_1"), true, 0, 0, 25 * S, 0);
        at(TEN_O_CLOCK + 45 * S);
        expect(limiter.tryAcquire("user_1"), false, 0, 15 * S, 15 * S, 0);
        at(TEN_O_CLOCK + 60 * S);
        expect(limiter.tryAcquire("user_1"), true, 2, 0, 60 * S, 0);
    }

    @Test
    void slidingWindowEstimateOfTheSeeds() {
        RateLimiter limiter = limiter(Algorithm.SLIDING_WINDOW, "100/1h");
        long previousWindow = TEN_O_CLOCK + H; // 11:00, a window of its own
        at(previousWindow + 20 * MIN);
        assertThat(limiter.tryAcquire("k", 84).allowed()).isTrue();
        at(previousWindow + H + 15 * MIN);
        // 84·0.75 + 0 + 36 = 99 ≤ 100
        expect(limiter.tryAcquire("k", 36), true, 1, 0, H + 45 * MIN, 0);
        // 84·0.75 + 36 + 1 = 100 ≤ 100: the last unit fits
        expect(limiter.tryAcquire("k"), true, 0, 0, H + 45 * MIN, 0);
        // 84·0.75 + 37 + 1 = 101: rejected until 84·(45m − d)/60m ≤ 62, d = 45m − floor(62·60m/84)
        long retry = 45 * MIN - 62 * H / 84;
        assertThat(retry).isEqualTo(42_857_142_858L);
        expect(limiter.tryAcquire("k"), false, 0, retry, H + 45 * MIN, 0);
        at(previousWindow + H + 15 * MIN + retry - 1);
        assertThat(limiter.tryAcquire("k").allowed()).isFalse();
        at(previousWindow + H + 15 * MIN + retry);
        assertThat(limiter.tryAcquire("k").allowed()).isTrue();
    }

    @Test
    void gcraTenPerMinuteOfTheSeeds() {
        RateLimiter limiter = limiter(Algorithm.GCRA, "10/60s");
        for (int i = 1; i <= 10; i++) {
            expect(limiter.tryAcquire("k"), true, 10 - i, 0, i * 6 * S, 0);
        }
        expect(limiter.tryAcquire("k"), false, 0, 6 * S, 60 * S, 0);
        at(TEN_O_CLOCK + 6 * S - 1);
        assertThat(limiter.tryAcquire("k").allowed()).isFalse();
        at(TEN_O_CLOCK + 6 * S);
        expect(limiter.tryAcquire("k"), true, 0, 0, 60 * S, 0);
    }

    @Test
    void fixedWindowFiveInTenSecondsWithFourThenSevenRequests() {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "5/10s");
        long window = TEN_O_CLOCK; // a multiple of 10 s
        for (int i = 0; i < 4; i++) {
            at(window + i * S);
            expect(limiter.tryAcquire("k"), true, 4 - i, 0, 10 * S - i * S, 0);
        }
        window += 10 * S;
        for (int i = 0; i < 7; i++) {
            at(window + i * S);
            Decision decision = limiter.tryAcquire("k");
            if (i < 5) {
                expect(decision, true, 4 - i, 0, 10 * S - i * S, 0);
            } else {
                expect(decision, false, 0, 10 * S - i * S, 10 * S - i * S, 0);
            }
        }
    }

    // ---------------------------------------------------------------- exact boundaries

    @Test
    void fixedWindowsAreAlignedToTheEpochAndEndExactly() {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "2/1m");
        at(TEN_O_CLOCK + MIN - 1);
        expect(limiter.tryAcquire("k", 2), true, 0, 0, 1, 0);
        expect(limiter.tryAcquire("k"), false, 0, 1, 1, 0);
        at(TEN_O_CLOCK + MIN);
        expect(limiter.tryAcquire("k"), true, 1, 0, MIN, 0);
    }

    @Test
    void slidingLogEntriesExpireExactlyOnePeriodAfterAdmission() {
        RateLimiter limiter = limiter(Algorithm.SLIDING_LOG, "3/10s");
        expect(limiter.tryAcquire("k", 2), true, 1, 0, 10 * S, 0);
        at(TEN_O_CLOCK + 4 * S);
        expect(limiter.tryAcquire("k"), true, 0, 0, 10 * S, 0);
        // two more need both entries gone; one more needs only the first (cost 2) gone
        expect(limiter.tryAcquire("k", 3), false, 0, 10 * S, 10 * S, 0);
        expect(limiter.tryAcquire("k"), false, 0, 6 * S, 10 * S, 0);
        at(TEN_O_CLOCK + 10 * S - 1);
        assertThat(limiter.tryAcquire("k").allowed()).isFalse();
        at(TEN_O_CLOCK + 10 * S);
        expect(limiter.tryAcquire("k", 2), true, 0, 0, 10 * S, 0);
    }

    @Test
    void tokenBucketGreedyRefillsContinuously() {
        RateLimiter limiter = limiter(Algorithm.TOKEN_BUCKET, "3/1s burst=6");
        expect(limiter.tryAcquire("k", 6), true, 0, 0, 2 * S, 0);
        // one token every 333,333,333⅓ ns: the first whole one at 333,333,334 ns
        expect(limiter.tryAcquire("k"), false, 0, 333_333_334, 2 * S, 0);
        at(TEN_O_CLOCK + 333_333_333);
        assertThat(limiter.tryAcquire("k").allowed()).isFalse();
        at(TEN_O_CLOCK + 333_333_334);
        expect(limiter.tryAcquire("k"), true, 0, 0, 2 * S, 0);
        at(TEN_O_CLOCK + S);
        expect(limiter.tryAcquire("k", 0), true, 2, 0, 1_333_333_334, 0);
    }

    @Test
    void leakyBucketShapingReleasesAtAConstantRate() {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.LEAKY_BUCKET).limit("2/1s burst=3")
                .mode(Mode.SHAPING).store(newStore()).clock(clock).build();
        expect(limiter.tryAcquire("k"), true, 2, 0, 500 * MS, 0);
        expect(limiter.tryAcquire("k"), true, 1, 0, S, 500 * MS);
        expect(limiter.tryAcquire("k"), true, 0, 0, 1500 * MS, S);
        expect(limiter.tryAcquire("k"), false, 0, 500 * MS, 1500 * MS, 0);
        at(TEN_O_CLOCK + 500 * MS);
        expect(limiter.tryAcquire("k"), true, 0, 0, 1500 * MS, S);
    }

    /**
     * acquire(maxWait) on a shaping queue holds a request at most maxWait: it is let into the queue only if its
     * turn comes within it (a review found a 1 s queue slept through a maxWait of 100 ms).
     */
    @Test
    void acquireLetsIntoAShapingQueueOnlyWhatLeavesWithinMaxWait() throws InterruptedException {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.LEAKY_BUCKET).limit("2/1s burst=3")
                .mode(Mode.SHAPING).store(newStore()).clock(clock).sleeper(Sleeper.advancing(clock)).build();
        expect(limiter.tryAcquire("k"), true, 2, 0, 500 * MS, 0);
        expect(limiter.tryAcquire("k"), true, 1, 0, S, 500 * MS);
        // the queue ahead drains in 1 s: past 600 ms, so nothing is taken; after 400 ms it would be within
        expect(limiter.acquire("k", Duration.ofMillis(600)), false, 1, 400 * MS, S, 0);
        assertThat(clock.nanos()).as("not waited: the queue drains no faster than the wait runs out")
                .isEqualTo(TEN_O_CLOCK);
        // no time to wait: only an empty queue would do, and it empties in 1 s
        expect(limiter.acquire("k", Duration.ZERO), false, 1, S, S, 0);
        // within 1 s: admitted into the queue, held its turn of 1 s
        expect(limiter.acquire("k", Duration.ofSeconds(1)), true, 0, 0, 1500 * MS, S);
        assertThat(clock.nanos()).isEqualTo(TEN_O_CLOCK + S);
        // at 1 s one turn of 500 ms is ahead; two more fill the queue, which then drains in 1.5 s
        expect(limiter.tryAcquire("k"), true, 1, 0, S, 500 * MS);
        expect(limiter.tryAcquire("k"), true, 0, 0, 1500 * MS, S);
        // room opens in 500 ms, and the turn is then 1 s away: 1.5 s in all, past a wait of 1 s
        expect(limiter.acquire("k", Duration.ofSeconds(1)), false, 0, 500 * MS, 1500 * MS, 0);
        assertThat(clock.nanos()).isEqualTo(TEN_O_CLOCK + S);
        // within 1.2 s: not yet, but the same call 300 ms later is (it waits 200 ms for room, then its turn of 1 s);
        // a review found the queue's own retry_after (500 ms, the room) returned instead
        expect(limiter.acquire("k", Duration.ofMillis(1200)), false, 0, 300 * MS, 1500 * MS, 0);
        assertThat(clock.nanos()).isEqualTo(TEN_O_CLOCK + S);
        // within 2 s: waits 500 ms for the room, then is held its turn of 1 s
        expect(limiter.acquire("k", Duration.ofSeconds(2)), true, 0, 0, 1500 * MS, S);
        assertThat(clock.nanos()).isEqualTo(TEN_O_CLOCK + 2500 * MS);
    }

    @Test
    void leakyBucketAsAMeterDelaysNothing() {
        RateLimiter limiter = limiter(Algorithm.LEAKY_BUCKET, "2/1s");
        expect(limiter.tryAcquire("k"), true, 1, 0, 500 * MS, 0);
        expect(limiter.tryAcquire("k"), true, 0, 0, S, 0);
        expect(limiter.tryAcquire("k"), false, 0, 500 * MS, S, 0);
    }

    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"GCRA", "TOKEN_BUCKET"})
    void delayModeAdmitsWithinMaxDelayAndReservesTheCost(Algorithm algorithm) {
        RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit("2/1s").delay(Duration.ofSeconds(1))
                .store(newStore()).clock(clock).build();
        expect(limiter.tryAcquire("k", 2), true, 0, 0, S, 0);
        expect(limiter.tryAcquire("k"), true, 0, 0, 1500 * MS, 500 * MS);
        expect(limiter.tryAcquire("k"), true, 0, 0, 2 * S, S);
        // needs 1.5 s, 0.5 s more than max_delay: rejected, nothing reserved
        expect(limiter.tryAcquire("k"), false, 0, 500 * MS, 2 * S, 0);
        expect(limiter.tryAcquire("k", 0), true, 0, 0, 2 * S, 0);
        at(TEN_O_CLOCK + 500 * MS);
        expect(limiter.tryAcquire("k"), true, 0, 0, 2 * S, S);
    }

    @Test
    void intervalRefillInDelayModeGoesIntoDebt() {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.TOKEN_BUCKET).limit("2/1s refill=interval")
                .delay(Duration.ofSeconds(2)).store(newStore()).clock(clock).build();
        expect(limiter.tryAcquire("k", 2), true, 0, 0, S, 0);
        expect(limiter.tryAcquire("k", 2), true, 0, 0, 2 * S, S);
        expect(limiter.tryAcquire("k", 2), true, 0, 0, 3 * S, 2 * S);
        expect(limiter.tryAcquire("k"), false, 0, S, 3 * S, 0);
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void aCostAboveTheCapacityCanNeverBeAdmittedAndChangesNothing(Algorithm algorithm) {
        RateLimiter limiter = limiter(algorithm, "5/1s");
        expect(limiter.tryAcquire("k", 6), false, 5, Decision.NEVER, 0, 0);
        // at the start of a second: untouched again when the window ends, or (sliding-window) when the next
        // one has too; every bucket and log refills in one period
        long reset = algorithm == Algorithm.SLIDING_WINDOW ? 2 * S : S;
        expect(limiter.tryAcquire("k", 5), true, 0, 0, reset, 0);
        expect(limiter.tryAcquire("k", 6), false, 0, Decision.NEVER, reset, 0);
        // costs past what a double holds exactly (Redis's Lua), and the largest: never, and nothing changed (a
        // review found only 6 tried)
        for (long huge : new long[] {(1L << 53) + 1, Long.MAX_VALUE}) {
            expect(limiter.tryAcquire("k", huge), false, 0, Decision.NEVER, reset, 0);
            expect(limiter.tryAcquire("fresh", huge), false, 5, Decision.NEVER, 0, 0);
        }
        expect(limiter.tryAcquire("fresh", 5), true, 0, 0, reset, 0);
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void aPeekChangesNothing(Algorithm algorithm) {
        RateLimiter limiter = limiter(algorithm, "5/1s");
        expect(limiter.tryAcquire("k", 0), true, 5, 0, 0, 0);
        // at the start of a second: a window (or the log's entry) ends in 1 s, the sliding window's weight in
        // 2 s, and the buckets refill 2 of 5 a second in 400 ms
        long reset = switch (algorithm) {
            case FIXED_WINDOW, SLIDING_LOG -> S;
            case SLIDING_WINDOW -> 2 * S;
            case TOKEN_BUCKET, GCRA, LEAKY_BUCKET -> 400 * MS;
        };
        expect(limiter.tryAcquire("k", 2), true, 3, 0, reset, 0);
        for (int i = 0; i < 3; i++) {
            expect(limiter.tryAcquire("k", 0), true, 3, 0, reset, 0);
        }
        assertThat(limiter.tryAcquire("k", 3).remaining()).isZero();
    }

    @Test
    void severalLimitsAreAllOrNothing() {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "2/1s", "3/10s");
        Limit perSecond = Limit.parse("2/1s");
        Limit perTen = Limit.parse("3/10s");
        Decision first = limiter.tryAcquire("k");
        expect(first, true, 1, 0, 10 * S, 0);
        reports(first, perSecond, S);
        expect(limiter.tryAcquire("k"), true, 0, 0, 10 * S, 0);
        Decision blocked = limiter.tryAcquire("k");
        expect(blocked, false, 0, S, 10 * S, 0);
        reports(blocked, perSecond, S);
        at(TEN_O_CLOCK + S);
        // the per-second limit admits 2, the per-ten-seconds one only 1: neither takes the request of 2
        Decision tooBig = limiter.tryAcquire("k", 2);
        expect(tooBig, false, 1, 9 * S, 9 * S, 0);
        reports(tooBig, perTen, 9 * S);
        expect(limiter.tryAcquire("k"), true, 0, 0, 9 * S, 0);
        at(TEN_O_CLOCK + 2 * S);
        Decision waiting = limiter.tryAcquire("k");
        expect(waiting, false, 0, 8 * S, 8 * S, 0);
        reports(waiting, perTen, 8 * S);
    }

    /**
     * The reset reported beside the deciding limit is that limit's own, not the key's: the headers name the limit
     * and its reset together. A past bug: the key's reset (its longest limit's) was reported beside a per-second
     * limit, telling a client of a 600/1m and 3600/1h key to come back in an hour.
     */
    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"FIXED_WINDOW", "SLIDING_WINDOW", "SLIDING_LOG", "GCRA"})
    void theDecidingLimitsResetIsItsOwn(Algorithm algorithm) {
        RateLimiter limiter = limiter(algorithm, "4/1s", "5/1m");
        Limit perSecond = Limit.parse("4/1s");
        Limit perMinute = Limit.parse("5/1m");
        // at the start of a second and of a minute: the per-second limit's reset after one request and after
        // four, the key's after one, and the per-minute limit's two seconds later. The sliding window counts a
        // request until the end of the window after its own; gcra's emission intervals are 0.25 s and 12 s.
        long[] resets = switch (algorithm) {
            case FIXED_WINDOW, SLIDING_LOG -> new long[]{S, S, 60 * S, 58 * S};
            case SLIDING_WINDOW -> new long[]{2 * S, 2 * S, 120 * S, 118 * S};
            default -> new long[]{S / 4, S, 12 * S, 46 * S};
        };
        Decision first = limiter.tryAcquire("k");
        expect(first, true, 3, 0, resets[2], 0);
        reports(first, perSecond, resets[0]);
        for (int i = 0; i < 3; i++) {
            limiter.tryAcquire("k");
        }
        Decision blocked = limiter.tryAcquire("k");
        assertThat(blocked.allowed()).isFalse();
        reports(blocked, perSecond, resets[1]);
        at(TEN_O_CLOCK + 2 * S);
        // the per-second limit is untouched again; the per-minute one, one request from rejecting, is reported
        Decision later = limiter.tryAcquire("k", 0);
        expect(later, true, 1, 0, resets[3], 0);
        reports(later, perMinute, resets[3]);
    }

    private static void reports(Decision decision, Limit limit, long limitResetAfterNanos) {
        assertThat(decision.limit() + " reset after " + decision.limitResetAfterNanos() + "ns")
                .isEqualTo(limit + " reset after " + limitResetAfterNanos + "ns");
    }

    @Test
    void aRequestStampedInThePastIsDecidedAtTheKeysLastTime() {
        RateLimiter limiter = limiter(Algorithm.FIXED_WINDOW, "1/1m");
        at(TEN_O_CLOCK + MIN);
        Rule rule = limiter.rule();
        Store store = limiter.store();
        assertThat(store.decide(rule, "k", 1, TEN_O_CLOCK + MIN).allowed()).isTrue();
        // one nanosecond into the previous window: still the current one for this key
        expect(store.decide(rule, "k", 1, TEN_O_CLOCK + MIN - 1), false, 0, MIN, MIN, 0);
    }

    /**
     * A past bug a review found: in delay mode an interval bucket reserved from the tokens it held plus its refills
     * uncapped, so the tokens left over before a refill slipped past the cap B. At 4/10s burst=2 four requests started
     * at each refill where the bucket holds two (twice the rate); at 3/1m, four units started at one refill.
     */
    @Test
    void anIntervalBucketsReservationsStartNoMoreAtARefillThanItHolds() {
        RateLimiter twoAtATime = RateLimiter.builder().rule(Rule.of(Algorithm.TOKEN_BUCKET,
                List.of(Limit.parse("4/10s burst=2 refill=interval")), Mode.DELAY, 30 * S)).store(newStore())
                .clock(clock).build();
        long[] delays = new long[8];
        for (int i = 0; i < delays.length; i++) {
            Decision decision = twoAtATime.tryAcquire("k");
            assertThat(decision.allowed()).as("request %d", i + 1).isTrue();
            delays[i] = decision.delayNanos();
        }
        assertThat(delays).containsExactly(0, 0, 10 * S, 10 * S, 20 * S, 20 * S, 30 * S, 30 * S);
        Decision ninth = twoAtATime.tryAcquire("k");
        assertThat(ninth.allowed()).isFalse();
        assertThat(ninth.retryAfterNanos()).as("it would start at 40 s, 10 s past the most delay").isEqualTo(10 * S);

        RateLimiter threeAMinute = RateLimiter.builder().rule(Rule.of(Algorithm.TOKEN_BUCKET,
                List.of(Limit.parse("3/1m refill=interval")), Mode.DELAY, 30 * S)).store(newStore()).clock(clock).build();
        long start = clock.nanos();
        assertThat(threeAMinute.tryAcquire("k", 2).delayNanos()).isZero();
        at(start + 30 * S);
        assertThat(threeAMinute.tryAcquire("k", 2).delayNanos()).as("from the refill at 1m").isEqualTo(30 * S);
        assertThat(threeAMinute.tryAcquire("k", 1).delayNanos()).as("the refill's third").isEqualTo(30 * S);
        at(start + MIN);
        Decision fourth = threeAMinute.tryAcquire("k", 1);
        assertThat(fourth.allowed()).as("the bucket holds 3 at 1m, all reserved").isFalse();
        assertThat(fourth.retryAfterNanos()).as("the refill at 2m, 30 s past the most delay").isEqualTo(30 * S);
    }

    /**
     * Bad input to a store is refused with the same message by every store, naming the value, and is no decision:
     * the key's state is as it was before.
     */
    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void badInputIsRefusedNamingItAndChangesNothing(Algorithm algorithm) {
        RateLimiter limiter = limiter(algorithm, "2/1m");
        Rule rule = limiter.rule();
        Store store = limiter.store();
        long now = TEN_O_CLOCK;
        assertThat(store.decide(rule, "k", 1, now).allowed()).isTrue();
        refused(() -> store.decide(rule, "", 1, now), "key must not be empty");
        refused(() -> store.decide(rule, "k", -1, now), "cost must be a whole number >= 0, got -1");
        refused(() -> store.decide(rule, "k", 1, -1), "time must be between 0 and " + Rule.MAX_TIME_NANOS
                + "ns since the epoch, got -1ns");
        refused(() -> store.decide(rule, "k", 1, Rule.MAX_TIME_NANOS + 1), "time must be between 0 and "
                + Rule.MAX_TIME_NANOS + "ns since the epoch, got " + (Rule.MAX_TIME_NANOS + 1) + "ns");
        assertThat(store.decide(rule, "k", 0, now).remaining()).as("the key as it was").isEqualTo(1);
        assertThat(store.decide(rule, "k", 1, now).allowed()).isTrue();
        assertThat(store.decide(rule, "k", 1, now).allowed()).isFalse();
    }

    private static void refused(org.assertj.core.api.ThrowableAssert.ThrowingCallable call, String message) {
        org.assertj.core.api.Assertions.assertThatThrownBy(call).isInstanceOf(IllegalArgumentException.class)
                .hasMessage(message);
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void resetForgetsTheKey(Algorithm algorithm) {
        RateLimiter limiter = limiter(algorithm, "2/1m");
        limiter.tryAcquire("k", 2);
        assertThat(limiter.tryAcquire("k").allowed()).isFalse();
        limiter.reset("k");
        expect(limiter.tryAcquire("k", 0), true, 2, 0, 0, 0);
        assertThat(limiter.tryAcquire("k", 2).allowed()).isTrue();
    }

    @Test
    void keysDoNotShareState() {
        RateLimiter limiter = limiter(Algorithm.GCRA, "1/1s");
        assertThat(limiter.tryAcquire("a").allowed()).isTrue();
        assertThat(limiter.tryAcquire("a").allowed()).isFalse();
        assertThat(limiter.tryAcquire("b").allowed()).isTrue();
        assertThat(limiter.tryAcquire("{a}").allowed()).isTrue();
    }

    // ---------------------------------------------------------------- random traces against the reference

    /** A rule to replay random traces through; {@code name} shows in the test report. */
    public record Scenario(String name, Algorithm algorithm, List<Limit> limits, Mode mode, long maxDelayNanos) {
        static Scenario of(Algorithm algorithm, String... limits) {
            return new Scenario(algorithm + " " + String.join(" + ", limits), algorithm,
                    Arrays.stream(limits).map(Limit::parse).collect(Collectors.toList()), Mode.REJECT, 0);
        }

        Scenario with(Mode mode, long maxDelayNanos) {
            boolean shown = mode == Mode.DELAY || mode == Mode.SHAPING && maxDelayNanos != Rule.NO_MAX_DELAY;
            return new Scenario(name + " " + mode.label() + (shown ? " " + maxDelayNanos / MS + "ms" : ""),
                    algorithm, limits, mode, maxDelayNanos);
        }

        public long longestPeriod() {
            return limits.stream().mapToLong(Limit::periodNanos).max().orElseThrow();
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /** Every algorithm, with awkward rates (P/L not a whole number), several limits, bursts, every mode. */
    public static Stream<Scenario> scenarios() {
        return Stream.of(
                Scenario.of(Algorithm.FIXED_WINDOW, "5/1s"),
                Scenario.of(Algorithm.FIXED_WINDOW, "3/700ms", "7/3s"),
                Scenario.of(Algorithm.SLIDING_LOG, "5/1s"),
                Scenario.of(Algorithm.SLIDING_LOG, "3/700ms", "7/3s"),
                Scenario.of(Algorithm.SLIDING_WINDOW, "7/1s"),
                Scenario.of(Algorithm.SLIDING_WINDOW, "3/700ms", "10/3s"),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s"),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s burst=7", "10/7s"),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s refill=interval"),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s burst=5 refill=interval", "4/3s refill=interval"),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s").with(Mode.DELAY, 700 * MS),
                Scenario.of(Algorithm.TOKEN_BUCKET, "2/1s refill=interval").with(Mode.DELAY, 1500 * MS),
                Scenario.of(Algorithm.TOKEN_BUCKET, "4/1s burst=2 refill=interval").with(Mode.DELAY, 2500 * MS),
                Scenario.of(Algorithm.TOKEN_BUCKET, "3/1s refill=interval", "5/3s").with(Mode.DELAY, 2 * S),
                Scenario.of(Algorithm.GCRA, "7/1s"),
                Scenario.of(Algorithm.GCRA, "3/1s burst=5", "10/7s"),
                Scenario.of(Algorithm.GCRA, "3/1s burst=2", "11/7s").with(Mode.DELAY, 900 * MS),
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4"),
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4", "5/3s").with(Mode.SHAPING, Rule.NO_MAX_DELAY),
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4").with(Mode.SHAPING, Rule.NO_MAX_DELAY),
                // shaping that holds at most a max delay: what acquire(maxWait) decides by (0: acquire with no wait)
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4").with(Mode.SHAPING, 700 * MS),
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4").with(Mode.SHAPING, 0),
                Scenario.of(Algorithm.LEAKY_BUCKET, "3/1s burst=4", "5/3s").with(Mode.SHAPING, 1200 * MS),
                Scenario.of(Algorithm.LEAKY_BUCKET, "1/1s burst=5", "10/1s burst=3").with(Mode.SHAPING, 600 * MS));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void randomTracesGiveTheDecisionsOfTheReferenceModel(Scenario scenario) {
        Rule rule = Rule.of(scenario.algorithm(), scenario.limits(), scenario.mode(), scenario.maxDelayNanos());
        long maxCapacity = scenario.limits().stream().mapToLong(l -> Math.max(l.amount(), l.burst())).max().orElseThrow();
        LongStream.range(0, 12).forEach(seed -> {
            Store store = newStore();
            ReferenceModel reference = new ReferenceModel(scenario.algorithm(), scenario.limits(), scenario.mode(),
                    scenario.maxDelayNanos());
            List<Request> trace = RandomTraces.generate(seed, 300, scenario.longestPeriod(), maxCapacity + 1,
                    true, TEN_O_CLOCK);
            for (int i = 0; i < trace.size(); i++) {
                Request request = trace.get(i);
                Decision expected = reference.decide(request.key(), request.nanos(), request.cost());
                Decision actual = store.decide(rule, request.key(), request.cost(), request.nanos());
                assertThat(actual).as("seed %d, request %d: %s", seed, i, request).isEqualTo(expected);
            }
        });
    }
}
