package dev.sluice.store;

import dev.sluice.algorithm.KeyState;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The eviction of one {@link KeyTable}: when the store is full, it takes out keys among the sixteenth decided least
 * recently, a few at a time, as a clock's hand goes round, from a cutoff estimated on a sample
 * ({@link #evictLeastRecent} says how, and why so). It takes keys out as the table removes them, with a
 * compare-and-set on the state ({@link KeyTable#retire}), so it needs no lock of the table's, and a key decided after
 * the hand read it is kept. Its hand, cutoff and odds are its own, under its own lock: one thread evicts at a time.
 */
final class Eviction {
    private final KeyTable keys;
    /** Keys whose ages the eviction's cutoff is estimated from; a table holding no more is read whole. */
    private static final int SAMPLE = 1_024;
    /** The most keys one call evicts, so that no new key waits for more than a short scan. */
    private static final int BATCH = 64;
    /** The most slots one look of the hand passes: where a sixteenth is evicted, about 500 keys' worth. */
    private static final int REACH = 16_384;
    /** Held while evicting: the hand and the cutoff below are its. */
    private final ReentrantLock evicting = new ReentrantLock();
    private final LongAdder evictions = new LongAdder();
    private KeyTable.Table handTable;
    private int hand;
    private int cutoff;
    private long evictableLeft;
    /** Of every {@code among} keys past the cutoff the hand meets, it evicts {@code chance}, drawn at random. */
    private int chance;
    private int among;
    private int chanceLeft;
    private int amongLeft;
    /** Whether the sample found keys expired: while so, the hand drops those and evicts none. */
    private boolean expiredFirst;

    Eviction(KeyTable keys) {
        this.keys = keys;
    }

    /**
     * Evicts keys among the sixteenth decided least recently, to make room in a full table: up to {@value #BATCH}
     * at a time, and at least one unless every key it would take was decided meanwhile; unless another thread has
     * made room since this one found the table full.
     *
     * <p>How. A cutoff is estimated from the ages of {@value #SAMPLE} keys drawn at random (of every key, when the
     * table holds no more): the age of the sixteenth oldest of them. A hand then goes round the table from where it
     * last stopped, as a clock's does, and evicts keys it meets that were last decided at the cutoff or before,
     * until the call's count is reached. When many keys tie at the cutoff (decided within one 16.8 ms), more than a
     * sixteenth lie past it: of every so many of those the sample counted past it, the hand takes as many as make a
     * sixteenth, drawn at random, so it meets one to evict every sixteen keys or so, and the keys it evicts are
     * spread over the whole table. When a table holds no more than the sample, the count is exact, the hand
     * goes round it all, and it evicts exactly the sixteenth oldest (the tied ones drawn at random). Once a
     * sixteenth of the table has been evicted under one cutoff, or a call of two looks of {@value #REACH} slots
     * takes out nothing, the cutoff is estimated again. While the sample shows expired keys, a look drops those
     * alone; one that finds fewer than its count within reach ends that, and the next evicts.
     *
     * <p>Why so. The first version picked exactly the sixteenth oldest in two passes over the table: at a
     * million keys that held every new key for 100 to 400 ms (on a server, the event loop deciding it), and it
     * grows with the table. Now a call reads at most twice {@value #SAMPLE} random keys and {@value #REACH}
     * slots. A key is evicted only past a cutoff near the sixteenth oldest, so one in use survives a flood of new
     * keys unless a sixteenth of the table came in within its last 16.8 ms. Drawing the tied keys at random keeps
     * the evicted keys from being those of one stretch of slots: slot order is hash order, and survivors skewed
     * by hash pack into long probe runs once the table is copied. Evicting the first tied keys met from the first
     * slot grew one run to 480,000 slots (a bug found by measuring a flood); a hand that took every tied key it
     * met, 2,952 in a table of 32,768 ({@code KeyTableEvictionTest} pins it). The hand reads a key's stamps as it
     * meets it, and a key admitted after that is kept ({@link KeyTable#retire} fails on a state that changed), so eviction
     * never undoes a decision.
     *
     * <p>Keys the hand meets that have expired by {@code expiredBy} are dropped first, whatever the cutoff and
     * the odds: their state no longer counts, so dropping them is no eviction (and is not counted as one). This
     * is what frees a full store whose keys expire as fast as new ones come: it had swept the whole table to find
     * the one key expired since the last sweep, for each new key (a million keys of 1/1s, a new one every
     * microsecond: fewer than 5,000 new keys a second once full, found by measuring it).
     *
     * @param now the time of the request that found the table full, from which ages are counted
     * @param expiredBy keys untouched by then are dropped as expired (the time less any out-of-order skew)
     * @return how many keys were taken out: dropped as expired, or evicted ({@link #evicted()} counts those)
     */
    long evictLeastRecent(long now, long expiredBy) {
        evicting.lock();
        try {
            long held = keys.size();
            if (held < keys.maxKeys()) {
                return 0;
            }
            KeyTable.Table current = keys.current();
            KeyTable.Table next = current.next;
            if (next == null) {
                return evictFrom(current, held, now, expiredBy);
            }
            // a resize is under way: evict from the old table's slots not moved yet, or from the table it fills,
            // as remove() would; first from the one holding most keys, which early in the copy is the old one
            boolean oldFirst = current.moved < (current.mask + 1) / 2;
            long removed = evictFrom(oldFirst ? current : next, held, now, expiredBy);
            return removed > 0 ? removed : evictFrom(oldFirst ? next : current, held, now, expiredBy);
        } finally {
            evicting.unlock();
        }
    }

    /** {@link #evictLeastRecent} in {@code tab}. */
    private long evictFrom(KeyTable.Table tab, long held, long now, long expiredBy) {
        Object[] slots = tab.slots;
        int capacity = tab.mask + 1;
        int nowStamp = KeyTable.stampOf(now);
        ThreadLocalRandom random = ThreadLocalRandom.current();
        if (handTable != tab) {
            handTable = tab;
            hand = random.nextInt(capacity);
            evictableLeft = 0;
        }
        long removed = 0;
        for (int look = 0; look < 2 && removed == 0; look++) {
            if (evictableLeft <= 0 && !estimateCutoff(slots, held, nowStamp, expiredBy, random)) {
                return 0;
            }
            long batch = Math.min(evictableLeft, BATCH);
            long evicted = 0;
            for (int scanned = 0; scanned < Math.min(capacity, REACH) && removed < batch; scanned++) {
                int i = hand;
                hand = (hand + 1) & tab.mask;
                Object key = KeyTable.SLOTS.getAcquire(slots, 2 * i);
                Object state = KeyTable.SLOTS.getAcquire(slots, 2 * i + 1);
                if (!KeyTable.isLive(key, state)) {
                    continue;
                }
                if (((KeyState) state).expired(expiredBy)) {
                    removed += keys.retire(tab, 2 * i, key, state) ? 1 : 0; // dropped, not evicted: its state no longer counts
                    continue;
                }
                if (expiredFirst || lastDecided((KeyState) state) - cutoff > 0) {
                    continue;
                }
                boolean drawn = random.nextInt(amongLeft) < chanceLeft; // selection sampling: chanceLeft of amongLeft
                amongLeft--;
                if (drawn && keys.retire(tab, 2 * i, key, state)) {
                    evicted++;
                    removed++;
                    chanceLeft--;
                }
                if (amongLeft == 0) {
                    amongLeft = among;
                    chanceLeft = chance;
                }
            }
            if (expiredFirst && removed < batch) {
                expiredFirst = false; // few expired within reach: evict from the next look on, not scan for them
                if (removed == 0) {
                    continue;
                }
            }
            evictableLeft = removed == 0 ? 0 : evictableLeft - evicted;
            evictions.add(evicted);
        }
        return removed;
    }

    /** Keys evicted (not those dropped as expired) since the table was made. */
    long evicted() {
        return evictions.sum();
    }

    /**
     * Estimates the cutoff and the odds from a sample of the keys held, and whether some have expired by
     * {@code expiredBy}; false if it found no key.
     */
    private boolean estimateCutoff(Object[] slots, long held, int nowStamp, long expiredBy, ThreadLocalRandom random) {
        int capacity = slots.length / 2;
        int[] ages = new int[SAMPLE];
        int count = 0;
        boolean expired = false;
        for (int tries = 0; tries < (held <= SAMPLE ? capacity : 16 * SAMPLE) && count < SAMPLE; tries++) {
            int i = held <= SAMPLE ? tries : random.nextInt(capacity);
            Object state = KeyTable.SLOTS.getAcquire(slots, 2 * i + 1);
            if (KeyTable.isLive(KeyTable.SLOTS.getAcquire(slots, 2 * i), state)) {
                ages[count++] = nowStamp - lastDecided((KeyState) state);
                expired |= ((KeyState) state).expired(expiredBy);
            }
        }
        if (count == 0) {
            return false;
        }
        expiredFirst = expired;
        int sixteenth = Math.max(1, count / 16);
        int oldest = largest(ages, count, sixteenth);
        cutoff = nowStamp - oldest;
        int past = 0;
        for (int k = 0; k < count; k++) {
            past += ages[k] >= oldest ? 1 : 0;
        }
        chance = chanceLeft = sixteenth;
        among = amongLeft = past;
        evictableLeft = Math.max(1, held / 16);
        return true;
    }

    /**
     * The stamp of when a key was last decided: admitted ({@link KeyState#time()}) or, if later, rejected or
     * peeked at ({@link KeyState#lastUsed()}).
     */
    private static int lastDecided(KeyState state) {
        int admitted = KeyTable.stampOf(state.time());
        int lastUsed = state.lastUsed();
        return lastUsed == KeyTable.NEVER_USED || lastUsed - admitted < 0 ? admitted : lastUsed;
    }

    /**
     * The {@code k}-th largest of {@code values[0..count)} (k from 1), reordering them: quickselect with a random
     * pivot, expected linear time whatever the order of the values.
     */
    static int largest(int[] values, int count, int k) {
        int lo = 0;
        int hi = count - 1;
        int want = k - 1; // its index once sorted in descending order
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (lo < hi) {
            int pivot = values[lo + random.nextInt(hi - lo + 1)];
            // three-way partition, descending: [lo, gt) > pivot, [gt, i) == pivot, (lt, hi] < pivot
            int gt = lo;
            int i = lo;
            int lt = hi;
            while (i <= lt) {
                int v = values[i];
                if (v > pivot) {
                    values[i++] = values[gt];
                    values[gt++] = v;
                } else if (v < pivot) {
                    values[i] = values[lt];
                    values[lt--] = v;
                } else {
                    i++;
                }
            }
            if (want < gt) {
                hi = gt - 1;
            } else if (want > lt) {
                lo = lt + 1;
            } else {
                return pivot;
            }
        }
        return values[lo];
    }
}
