package dev.sluice.server.metrics;

import dev.sluice.server.Checked;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The recent traffic of each policy, for the dashboard: admitted and rejected requests per second over the
 * last five minutes, and the busiest keys of the current minute and the one before.
 *
 * <p>Seconds are kept in a ring of 300 slots stamped with the second they count, so a slot left from an
 * earlier lap reads as zero. The busiest keys are found with the Space-Saving algorithm (Metwally et al.):
 * at most {@value #TRACKED} counters; a new key takes over the smallest counter and inherits its count, so a
 * key that is truly frequent is never missed and its count is over-estimated by at most the smallest count.
 * Recording a key never waits: when another thread holds the sketch, the key is not counted there (the
 * per-second counts stay exact).
 *
 * <p>Why the minute before too: with the current minute alone, the busiest keys vanished at every turn of the
 * clock's minute, so a dashboard read a second after it showed none (and a test whose requests and read fell on
 * either side of it found nothing). A key's count is then its requests in up to two minutes, the sum of its
 * two sketches' counts, still an upper bound.
 */
public final class Traffic {
    static final int SECONDS = 300;
    static final int TRACKED = 64;

    private final Map<String, PolicyTraffic> policies = new ConcurrentHashMap<>();
    private final LongSupplier millis;

    public Traffic() {
        this(System::currentTimeMillis);
    }

    /** @param millis the wall clock, in milliseconds since the epoch (the dashboard shows wall-clock seconds) */
    Traffic(LongSupplier millis) {
        this.millis = millis;
    }

    /** A point of the dashboard's chart: a second (epoch) and what was admitted and rejected in it. */
    public record Second(long epochSecond, long admitted, long rejected) {
    }

    /** One of the busiest keys: requests (an upper bound) and how many of them were rejected. */
    public record KeyCount(String key, long requests, long rejected) {
    }

    void record(String policy, String key, Checked.Outcome outcome) {
        policies.computeIfAbsent(policy, name -> new PolicyTraffic()).record(key, outcome, millis.getAsLong() / 1000);
    }

    /** The last {@code seconds} seconds of a policy, oldest first. */
    public List<Second> seconds(String policy, int seconds) {
        PolicyTraffic traffic = policies.get(policy);
        long now = millis.getAsLong() / 1000;
        List<Second> points = new ArrayList<>();
        for (long second = now - Math.min(seconds, SECONDS) + 1; second <= now; second++) {
            points.add(traffic == null ? new Second(second, 0, 0) : traffic.second(second));
        }
        return points;
    }

    /** The {@code n} busiest keys of a policy in the current minute and the one before, busiest first. */
    public List<KeyCount> topKeys(String policy, int n) {
        PolicyTraffic traffic = policies.get(policy);
        return traffic == null ? List.of() : traffic.top(n, millis.getAsLong() / 60_000);
    }

    private static final class PolicyTraffic {
        private final AtomicLongArray stamps = new AtomicLongArray(SECONDS);
        private final AtomicLongArray admitted = new AtomicLongArray(SECONDS);
        private final AtomicLongArray rejected = new AtomicLongArray(SECONDS);
        private final ReentrantLock sketchLock = new ReentrantLock();
        private Map<String, long[]> sketch = new HashMap<>(); // key -> {requests, rejected}
        private long sketchMinute;
        private Map<String, long[]> previous = Map.of(); // the sketch of the minute before sketchMinute, if any
        private long previousMinute = Long.MIN_VALUE;

        void record(String key, Checked.Outcome outcome, long second) {
            boolean refused = outcome == Checked.Outcome.REJECTED || outcome == Checked.Outcome.SHADOW_REJECTED;
            int slot = (int) (second % SECONDS);
            long stamp = stamps.get(slot);
            if (stamp != second) {
                if (stamp != -1 && stamp < second && stamps.compareAndSet(slot, stamp, -1)) {
                    admitted.set(slot, 0); // this thread alone starts the slot anew
                    rejected.set(slot, 0);
                    stamps.set(slot, second);
                } else {
                    while (stamps.get(slot) == -1) {
                        Thread.onSpinWait();
                    }
                }
            }
            (refused ? rejected : admitted).incrementAndGet(slot);
            if (sketchLock.tryLock()) {
                try {
                    count(key, refused, second / 60);
                } finally {
                    sketchLock.unlock();
                }
            }
        }

        Second second(long second) {
            int slot = (int) (second % SECONDS);
            return stamps.get(slot) == second ? new Second(second, admitted.get(slot), rejected.get(slot))
                    : new Second(second, 0, 0);
        }

        private void count(String key, boolean refused, long minute) {
            if (minute != sketchMinute) {
                previous = sketch;
                previousMinute = sketchMinute;
                sketch = new HashMap<>();
                sketchMinute = minute;
            }
            long[] counts = sketch.get(key);
            if (counts == null) {
                if (sketch.size() < TRACKED) {
                    counts = new long[2];
                } else {
                    String smallest = null;
                    for (Map.Entry<String, long[]> entry : sketch.entrySet()) {
                        if (smallest == null || entry.getValue()[0] < sketch.get(smallest)[0]) {
                            smallest = entry.getKey();
                        }
                    }
                    counts = sketch.remove(smallest);
                    counts[1] = 0;
                }
                sketch.put(key, counts);
            }
            counts[0]++;
            if (refused) {
                counts[1]++;
            }
        }

        List<KeyCount> top(int n, long minute) {
            sketchLock.lock();
            try {
                Map<String, long[]> merged = new HashMap<>();
                if (sketchMinute == minute || sketchMinute == minute - 1) {
                    add(sketch, merged);
                }
                if (previousMinute == minute - 1) {
                    add(previous, merged);
                }
                return merged.entrySet().stream()
                        .map(entry -> new KeyCount(entry.getKey(), entry.getValue()[0], entry.getValue()[1]))
                        .sorted(Comparator.comparingLong(KeyCount::requests).reversed().thenComparing(KeyCount::key))
                        .limit(n).toList();
            } finally {
                sketchLock.unlock();
            }
        }

        private static void add(Map<String, long[]> from, Map<String, long[]> to) {
            from.forEach((key, counts) -> {
                long[] sum = to.computeIfAbsent(key, absent -> new long[2]);
                sum[0] += counts[0];
                sum[1] += counts[1];
            });
        }
    }
}
