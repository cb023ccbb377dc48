package dev.sluice.testkit;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The laws of docs/algorithms.md that hold for every trace, checked on generated ones. */
class AlgorithmProperties {
    private static final long MS = 1_000_000L;
    private static final long START = StoreConformance.TEN_O_CLOCK;

    /** One request of a generated trace: the gap since the one before, its cost and which key. */
    record Step(long gapNanos, long cost, int key) {
    }

    @Provide
    Arbitrary<List<Step>> traces() {
        Arbitrary<Long> gaps = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(4, Arbitraries.just(0L)),
                net.jqwik.api.Tuple.of(2, Arbitraries.longs().between(1, 1_000)),
                net.jqwik.api.Tuple.of(4, Arbitraries.longs().between(1, 3_000).map(ms -> ms * MS)),
                net.jqwik.api.Tuple.of(2, Arbitraries.longs().between(1, 3_000_000_000L)));
        Arbitrary<Long> costs = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(6, Arbitraries.just(1L)),
                net.jqwik.api.Tuple.of(3, Arbitraries.longs().between(0, 8)));
        return Combinators.combine(gaps, costs, Arbitraries.integers().between(0, 2)).as(Step::new)
                .list().ofMinSize(1).ofMaxSize(150);
    }

    private static List<Decision> run(Rule rule, List<Step> trace) {
        Store store = new InMemoryStore();
        List<Decision> decisions = new ArrayList<>();
        long t = START;
        for (Step step : trace) {
            t += step.gapNanos();
            decisions.add(store.decide(rule, "k" + step.key(), step.cost(), t));
        }
        return decisions;
    }

    @Property
    void slidingLogNeverAdmitsMoreThanTheLimitInAnyWindowOfItsPeriod(
            @ForAll("traces") List<Step> trace, @ForAll @IntRange(min = 1, max = 8) int amount,
            @ForAll @LongRange(min = 1, max = 3_000) long periodMs) {
        Limit limit = Limit.of(amount, periodMs * MS);
        List<Decision> decisions = run(Rule.of(Algorithm.SLIDING_LOG, List.of(limit)), trace);
        for (int key = 0; key < 3; key++) {
            List<long[]> admitted = new ArrayList<>();
            long t = START;
            for (int i = 0; i < trace.size(); i++) {
                t += trace.get(i).gapNanos();
                if (trace.get(i).key() == key && decisions.get(i).allowed() && trace.get(i).cost() > 0) {
                    admitted.add(new long[] {t, trace.get(i).cost()});
                }
            }
            // the busiest window of length P starts at an admission
            for (long[] start : admitted) {
                long inWindow = admitted.stream()
                        .filter(a -> a[0] >= start[0] && a[0] < start[0] + limit.periodNanos())
                        .mapToLong(a -> a[1]).sum();
                assertThat(inWindow).isLessThanOrEqualTo(amount);
            }
        }
    }

    @Property
    void greedyTokenBucketAndGcraGiveTheSameDecisions(
            @ForAll("traces") List<Step> trace, @ForAll @IntRange(min = 1, max = 8) int amount,
            @ForAll @LongRange(min = 1, max = 3_000) long periodMs, @ForAll @IntRange(min = 1, max = 10) int burst) {
        Limit limit = Limit.of(amount, periodMs * MS).withBurst(burst);
        // the core computes both on one TAT; the reference keeps a token count for one and a TAT for the other
        ReferenceModel tokens = new ReferenceModel(Algorithm.TOKEN_BUCKET, List.of(limit), Mode.REJECT, 0);
        ReferenceModel tat = new ReferenceModel(Algorithm.GCRA, List.of(limit), Mode.REJECT, 0);
        List<Decision> bucket = run(Rule.of(Algorithm.TOKEN_BUCKET, List.of(limit)), trace);
        List<Decision> gcra = run(Rule.of(Algorithm.GCRA, List.of(limit)), trace);
        long t = START;
        for (int i = 0; i < trace.size(); i++) {
            Step step = trace.get(i);
            t += step.gapNanos();
            Decision expected = tokens.decide("k" + step.key(), t, step.cost());
            assertThat(tat.decide("k" + step.key(), t, step.cost())).isEqualTo(expected);
            assertThat(bucket.get(i)).isEqualTo(expected);
            assertThat(gcra.get(i)).isEqualTo(expected);
        }
    }

    @Provide
    Arbitrary<Rule> rules() {
        Arbitrary<Limit> limits = Combinators.combine(
                        Arbitraries.longs().between(1, 8), Arbitraries.longs().between(1, 3_000),
                        Arbitraries.longs().between(0, 4))
                .as((amount, periodMs, extraBurst) -> Limit.of(amount, periodMs * MS).withBurst(amount + extraBurst));
        Arbitrary<Algorithm> algorithms = Arbitraries.of(Algorithm.class);
        return Combinators.combine(algorithms, limits.list().ofMinSize(1).ofMaxSize(3), Arbitraries.of(Refill.class))
                .as((algorithm, chosen, refill) -> {
                    List<Limit> fitting = chosen.stream()
                            .map(l -> algorithm.hasBurst() ? l : l.withBurst(l.amount()))
                            .map(l -> algorithm == Algorithm.TOKEN_BUCKET ? l.withRefill(refill) : l)
                            .toList();
                    return Rule.of(algorithm, fitting);
                });
    }

    @Property
    void aRejectedRequestChangesNothing(@ForAll("traces") List<Step> trace, @ForAll("rules") Rule rule) {
        List<Decision> decisions = run(rule, trace);
        // replay without the rejected requests (keeping their time): the rest is decided the same
        List<Step> admittedOnly = new ArrayList<>();
        List<Decision> expected = new ArrayList<>();
        long carriedGap = 0;
        for (int i = 0; i < trace.size(); i++) {
            Step step = trace.get(i);
            if (decisions.get(i).allowed()) {
                admittedOnly.add(new Step(step.gapNanos() + carriedGap, step.cost(), step.key()));
                expected.add(decisions.get(i));
                carriedGap = 0;
            } else {
                carriedGap += step.gapNanos();
            }
        }
        assertThat(run(rule, admittedOnly)).isEqualTo(expected);
    }

    @Property
    void severalLimitsAreAllOrNothing(@ForAll("traces") List<Step> trace, @ForAll("rules") Rule rule) {
        Store together = new InMemoryStore();
        List<Store> apart = new ArrayList<>();
        List<Rule> singles = new ArrayList<>();
        for (Limit limit : rule.limits()) {
            apart.add(new InMemoryStore());
            singles.add(Rule.of(rule.algorithm(), List.of(limit)));
        }
        long t = START;
        for (Step step : trace) {
            t += step.gapNanos();
            String key = "k" + step.key();
            Decision decision = together.decide(rule, key, step.cost(), t);
            // each limit alone: admitted iff what it has left covers the cost, seen with a peek
            boolean everyLimitAdmits = true;
            long leastRemaining = Long.MAX_VALUE;
            for (int i = 0; i < singles.size(); i++) {
                Decision peek = apart.get(i).decide(singles.get(i), key, 0, t);
                everyLimitAdmits &= peek.remaining() >= step.cost();
                leastRemaining = Math.min(leastRemaining, peek.remaining());
            }
            assertThat(decision.allowed()).isEqualTo(everyLimitAdmits);
            if (decision.allowed() && step.cost() > 0) {
                leastRemaining = Long.MAX_VALUE;
                for (int i = 0; i < singles.size(); i++) {
                    Decision alone = apart.get(i).decide(singles.get(i), key, step.cost(), t);
                    assertThat(alone.allowed()).isTrue();
                    leastRemaining = Math.min(leastRemaining, alone.remaining());
                }
            }
            assertThat(decision.remaining()).isEqualTo(leastRemaining);
        }
    }
}
