package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.ManualClock;
import dev.sluice.RateLimiter;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;

import static org.assertj.core.api.Assertions.assertThat;

/** Many threads on one key admit exactly what the algorithm allows: no decision is lost to a race. */
class InMemoryStoreConcurrencyTest {
    private static final int THREADS = 8;
    private static final int ATTEMPTS = 100_000;

    /** Runs {@code THREADS × ATTEMPTS} decisions at once and returns the sum of what each thread counted. */
    private static long hammer(RateLimiter limiter, ToLongFunction<Decision> count) throws Exception {
        return sum(atOnce(THREADS, thread -> {
            long counted = 0;
            for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
                counted += count.applyAsLong(limiter.tryAcquire("the-key"));
            }
            return counted;
        }));
    }

    /** A task of a thread started with others at once: given its number, it returns what it counted. */
    private interface Counting {
        long run(int thread) throws Exception;
    }

    /** Runs {@code threads} tasks, each on a thread of its own, all let go at once; returns what each counted. */
    private static List<Long> atOnce(int threads, Counting task) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<Long>> runs = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int thread = i;
            runs.add(pool.submit(() -> {
                start.await();
                return task.run(thread);
            }));
        }
        start.countDown();
        List<Long> counted = new ArrayList<>();
        for (Future<Long> run : runs) {
            counted.add(run.get(2, TimeUnit.MINUTES));
        }
        pool.shutdown();
        return counted;
    }

    private static long sum(List<Long> counts) {
        return counts.stream().mapToLong(Long::longValue).sum();
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void eightThreadsOnOneKeyAdmitExactlyTheLimitWhileTimeStandsStill(Algorithm algorithm) throws Exception {
        RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit("50000/1h")
                .clock(new ManualClock(1_700_000_000_000_000_000L)).build();
        long admitted = hammer(limiter, d -> d.allowed() ? 1 : 0);
        assertThat(admitted).isEqualTo(50_000);
        assertThat(limiter.tryAcquire("the-key", 0).remaining()).isZero();
    }

    /**
     * Several sliding logs on one key (a stack): each admission appends to each log, each claiming its slot in arrays
     * other states share, and a lost compare-and-set of the key wastes every slot it claimed.
     */
    @org.junit.jupiter.api.Test
    void eightThreadsOnAStackOfSlidingLogsAdmitExactlyTheTightestLimit() throws Exception {
        ManualClock clock = new ManualClock(1_700_000_000_000_000_000L);
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.SLIDING_LOG).limit("30000/1d").limit("20000/1h")
                .clock(clock).build();
        assertThat(hammer(limiter, d -> d.allowed() ? 1 : 0)).isEqualTo(20_000);
        // an hour on, the hour's log has emptied and the day's holds 20,000: 10,000 more
        clock.advanceNanos(3_600_000_000_000L);
        assertThat(hammer(limiter, d -> d.allowed() ? 1 : 0)).isEqualTo(10_000);
        assertThat(limiter.tryAcquire("the-key", 0).remaining()).isZero();
    }

    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"FIXED_WINDOW", "SLIDING_LOG", "GCRA"})
    void eightThreadsNeverAdmitMoreThanTheRateAllowsWhileTimeRuns(Algorithm algorithm) throws Exception {
        Limit limit = Limit.parse("20000/1s");
        RateLimiter limiter = RateLimiter.builder().algorithm(algorithm).limit(limit).clock(Clock.system()).build();
        long start = Clock.system().nanos();
        long admitted = hammer(limiter, d -> d.allowed() ? 1 : 0);
        long elapsed = Clock.system().nanos() - start;
        // gcra: B at once, then L per P; fixed-window: L in each window the run touched (one more than it spans);
        // sliding-log: L in any P, so L in each P of the run and the part of one left (the log's entries are appended
        // in place by whichever thread takes the slot, the others copy: a race there would admit more)
        long allowed = algorithm == Algorithm.GCRA
                ? limit.burst() + elapsed * limit.amount() / limit.periodNanos() + 1
                : algorithm == Algorithm.SLIDING_LOG
                ? (elapsed / limit.periodNanos() + 1) * limit.amount()
                : (elapsed / limit.periodNanos() + 2) * limit.amount();
        assertThat(admitted).isPositive().isLessThanOrEqualTo(allowed);
    }

    /**
     * A bug found by trying the library: a new key that found the store full asked for room, and was refused it
     * whenever no stored key could expire yet, without looking whether another thread had meanwhile swept the
     * store (and made the room). Here thread y finds the store full and waits while x sweeps the two expired keys
     * and takes one place: y then finds the other, as a store with room must give it.
     */
    @Test
    void aNewKeyTakesTheRoomAnotherThreadsSweepMade() throws Exception {
        ManualClock manual = new ManualClock(0);
        CountDownLatch yFoundItFull = new CountDownLatch(1);
        CountDownLatch xDone = new CountDownLatch(1);
        ThreadLocal<int[]> reads = ThreadLocal.withInitial(() -> new int[1]);
        Clock clock = () -> {
            // y's second reading comes after it found the store full: it waits there for x
            if (Thread.currentThread().getName().equals("y") && ++reads.get()[0] == 2) {
                yFoundItFull.countDown();
                try {
                    xDone.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            return manual.nanos();
        };
        InMemoryStore store = InMemoryStore.builder().maxKeys(2).build();
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1s").store(store).clock(clock)
                .build();
        limiter.tryAcquire("a");
        limiter.tryAcquire("b");
        manual.set(2_000_000_000L); // a and b are untouched again: the store is full of keys it may drop
        Decision[] y = new Decision[1];
        Thread thread = new Thread(() -> y[0] = limiter.tryAcquire("y"), "y");
        thread.start();
        assertThat(yFoundItFull.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(limiter.tryAcquire("x").allowed()).as("x swept a and b").isTrue();
        xDone.countDown();
        thread.join(10_000);
        assertThat(y[0].allowed()).as("y took the place left, with %d of 2 keys stored", store.size()).isTrue();
        assertThat(store.size()).isEqualTo(2);
    }
    /**
     * A full store under a flood of new keys from four threads, while four more decide one hot key: the flood
     * evicts only keys idler than the hot key, so the hot key is decided exactly (100 of 4,000 admitted), every
     * new key is stored, and every key stored is either still there or counted as evicted.
     */
    @Test
    void aFloodOfNewKeysEvictsIdleKeysAndNeverTheOneInUse() throws Exception {
        long t0 = 1_700_000_000_000_000_000L;
        long t1 = t0 + 1_000_000_000L; // about 60 stamps later
        InMemoryStore store = InMemoryStore.builder().maxKeys(1_000).build();
        Rule oneADay = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1d")));
        Rule hundredADay = Rule.of(Algorithm.FIXED_WINDOW,
                List.of(Limit.parse("100/1d")));
        for (int i = 0; i < 1_000; i++) {
            store.decide(oneADay, "old-" + i, 1, t0);
        }
        // even threads decide the hot key 1,000 times each, odd ones put 200 new keys in each
        List<Long> counts = atOnce(THREADS, thread -> {
            long admitted = 0;
            if (thread % 2 == 0) {
                for (int attempt = 0; attempt < 1_000; attempt++) {
                    admitted += store.decide(hundredADay, "hot", 1, t1).allowed() ? 1 : 0;
                }
            } else {
                for (int i = 0; i < 200; i++) {
                    admitted += store.decide(oneADay, "new-" + thread / 2 + "-" + i, 1, t1).allowed() ? 1 : 0;
                }
            }
            return admitted;
        });
        long hotAdmitted = 0;
        long newAdmitted = 0;
        for (int thread = 0; thread < THREADS; thread++) {
            if (thread % 2 == 0) {
                hotAdmitted += counts.get(thread);
            } else {
                newAdmitted += counts.get(thread);
            }
        }
        assertThat(hotAdmitted).as("the hot key kept its count").isEqualTo(100);
        assertThat(newAdmitted).isEqualTo(800);
        assertThat(store.turnedAway()).isZero();
        long oldKept = 0;
        for (int i = 0; i < 1_000; i++) {
            oldKept += 1 - store.decide(oneADay, "old-" + i, 0, t1).remaining();
        }
        for (int thread = 0; thread < THREADS / 2; thread++) {
            for (int i = 0; i < 200; i++) {
                assertThat(store.decide(oneADay, "new-" + thread + "-" + i, 0, t1).remaining()).isZero();
            }
        }
        assertThat(store.decide(hundredADay, "hot", 0, t1).remaining()).isZero();
        assertThat(store.evicted()).as("evicted: the old keys gone").isEqualTo(1_000 - oldKept);
        assertThat(store.size()).isEqualTo(oldKept + 801).isLessThanOrEqualTo(1_000);
    }
    /**
     * Four threads put 400,000 keys into a store of 100,000: its table (262,144 slots) is resized by the resizing
     * thread while the four evict, from the old table's slots not moved yet and from the table being filled. No
     * key may be lost or counted twice: every key is either held, with its count, or counted as evicted.
     */
    @Test
    void evictingWhileTheTableIsResizedLosesNothing() throws Exception {
        long t0 = 1_700_006_400L * 1_000_000_000L;
        InMemoryStore store = InMemoryStore.builder().maxKeys(100_000).build();
        Rule oneADay = Rule.of(Algorithm.FIXED_WINDOW,
                List.of(Limit.parse("1/1d")));
        int perThread = 100_000;
        long admitted = sum(atOnce(4, thread -> {
            long counted = 0;
            for (int i = 0; i < perThread; i++) {
                counted += store.decide(oneADay, thread + "-" + i, 1, t0 + i * 1_000L).allowed() ? 1 : 0;
            }
            return counted;
        }));
        assertThat(admitted).as("every key new, or evicted and so new again").isEqualTo(4L * perThread);
        long held = 0;
        for (int thread = 0; thread < 4; thread++) {
            for (int i = 0; i < perThread; i++) {
                // a peek: 0 left if held, 1 if evicted (and a peek stores nothing)
                held += 1 - store.decide(oneADay, thread + "-" + i, 0, t0 + perThread * 1_000L).remaining();
            }
        }
        assertThat(store.size()).isEqualTo(held).isLessThanOrEqualTo(100_000);
        assertThat(store.evicted()).isEqualTo(4L * perThread - held);
        assertThat(store.turnedAway()).isZero();
    }
}
