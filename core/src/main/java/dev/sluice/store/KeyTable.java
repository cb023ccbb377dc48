package dev.sluice.store;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.algorithm.KeyState;
import dev.sluice.algorithm.Outcome;
import dev.sluice.algorithm.Rule;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.security.SecureRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The keys of the in-memory store and their states: an open-addressing hash table in one array of
 * {@code [key, state]} pairs (and one of the keys' hashes beside it), where every decision is one
 * compare-and-set on the state of its key.
 *
 * <h2>Why not a ConcurrentHashMap</h2>
 * A {@code ConcurrentHashMap} entry costs a 32-byte node, and a state swapped with compare-and-set needs a
 * holder object of 16 more; with the key's {@code String} (56 bytes for {@code "user-123456"}) a key costs
 * about 110 bytes before its state. Here a key costs two references and a hash in the arrays, a compact copy
 * of its characters ({@code byte[]} when every character is Latin-1: 32 bytes for {@code "user-123456"}) and
 * its state object: about 100 bytes for a gcra key at a million keys (a quarter of what a Bucket4j bucket in
 * a {@code ConcurrentHashMap} takes, measured side by side by {@code BytesPerKey} in bench/). The hash costs
 * 5 to 8 of them and spares a probe the bytes of every other key it passes, and a resize the rehashing.
 *
 * <h2>The slots</h2>
 * A key slot is empty ({@code null}), holds a key, or a {@link #TOMBSTONE} once its key has been removed (a
 * tombstone is never reused: probing goes past it, and the next resize drops it). A state slot holds the
 * key's {@link KeyState}, {@code null} while the key is untouched, {@link #RETIRED} while the key is being
 * removed, and during a resize {@link #MOVING} while its state is being copied, then {@link #MOVED} (copied)
 * or {@link #DROPPED} (nothing to copy).
 *
 * <ul>
 *   <li><b>Deciding</b> reads the key's state, computes the outcome with the pure {@link Rule#decide}, and
 *       installs the new state with one compare-and-set; if another thread got there first it decides
 *       again. A rejection or a peek writes nothing.</li>
 *   <li><b>Inserting</b> claims an empty key slot with a compare-and-set, then installs the state with
 *       another, from {@code null}: a thread that found the new key in between and decided on its untouched
 *       state may win that race, and then the inserter decides again on the newer state.</li>
 *   <li><b>Removing</b> an untouched or expired key first swaps its state for {@link #RETIRED} (which fails
 *       if a decision got in first), then its key for a {@link #TOMBSTONE}; a thread that meets a retired
 *       state helps with the second step and starts over, and will insert the key afresh.</li>
 *   <li><b>Resizing</b> (when keys and tombstones fill three quarters of the slots) drops the keys untouched
 *       by then (see {@link #resize}), makes a new table sized so that the live keys fill at most half of it
 *       (so between resizes a table is half to three quarters full, and a key costs 16 to 24 bytes of
 *       arrays), publishes it as the old one's {@code next}, and then moves the old table over slot by slot.
 *       An empty key slot becomes {@link #MOVED} by compare-and-set, so a new key that probes to it goes on
 *       in the next table. A state slot becomes {@link #MOVING} by compare-and-set (so no decision lands in
 *       the old slot after its copy), its key and state are put into the next table, and then the slot
 *       becomes {@link #MOVED}: a decider that meets {@code MOVED} finds its key in the next table, and one
 *       that meets {@code MOVING} waits for that one key's copy, never for the whole table's. Keys in slots
 *       not reached yet are decided in the old table as usual (and copied later). So while a million keys
 *       move (tens of milliseconds) no decider waits for them; before, every thread that met a moved slot
 *       waited for the whole copy.</li>
 *   <li><b>Resizing off the caller.</b> A table of {@value #BACKGROUND_CAPACITY} slots or more, unless its keys
 *       mostly come and go ({@code Table.churning}), is resized by a thread of its own ({@code sluice-key-table-resize}): the new key that finds it crowded (three quarters)
 *       hands the resize over and goes in, and so do new keys after it, up to seven eighths, by when the copy is
 *       long done (a million keys move in 100 to 400 ms; an eighth of two million slots is 262,144 new keys).
 *       Only past seven eighths does a caller resize, or wait for the resize, itself. Before, the one request
 *       that found the table crowded paid for the whole copy, 280 to 410 ms at three million keys: on a server,
 *       the event loop deciding it, and every connection on that loop, stopped that long.</li>
 *   <li><b>New keys during a resize</b> go where their probe ends, as any key: into an empty slot of the old
 *       table not reached yet (and are copied later), or, past a {@code MOVED} slot, into the new table. But
 *       only while the new table keeps room for everything still to come: every key still to come into it is
 *       a key of the store not in it yet (a copy, or a new key under way), and needs an old slot not moved yet
 *       or is being inserted, so a new key goes in only if the new table's {@code used} (counting its own slot,
 *       if it goes into the new table) plus the fewer of the store's keys not in the new table and the old
 *       slots not moved yet is at most seven eighths of the new table; otherwise it waits for the resize. Once
 *       a key has gone in so, every copy after it is a key counted then, and the new table never fills. (It
 *       counted the slots alone once: a resize into a table of the same size, which a full store that evicts
 *       makes to clear its tombstones, then held every new key until the copy was done.) A bug pinned: new keys
 *       went in with no such bound, the new table (sized for the keys live when the resize began) filled up,
 *       and the copy of the next key looked for an empty slot forever, holding the lock every other inserter
 *       waits on ({@code KeyTableResizeTest}).</li>
 *   <li><b>Keys chosen to collide.</b> A key's slot comes from {@link String#hashCode} (fast, and cached by
 *       the string), spread by a multiplication so that keys named in sequence ({@code user-1},
 *       {@code user-2}) do not fill neighbouring slots into long runs. But anyone can make keys that share it
 *       ({@code "Aa"} and {@code "BB"} do, and so do the 2^n keys made of n such pairs), and a client that picks its key (an API key header, an Envoy descriptor) could send
 *       thousands: each new one walked past all the others, and so did every key whose slot fell in their run
 *       (found by trying it: 32,768 such keys took 4.2 s to put in, and 32,768 ordinary keys after them 3.1 s).
 *       So a probe that passes more than {@link #MOST_TWINS} keys of its own hash, or more than
 *       {@link #LONGEST_PROBE} keys, has the table copied by a resize into one hashed with a secret seed
 *       ({@link StoredKeys#seeded(String, long)}), for which no keys collide more than chance allows. The seeded hash
 *       costs two multiplications a character on every decision, so a table takes it only when attacked, and
 *       keeps it. Each table knows its hash, and a decider that follows a resize hashes its key again for the
 *       next table.</li>
 *   <li><b>Evicting</b> (when the store is told to, once the table holds its maximum of keys) drops the
 *       expired keys it meets and removes keys among the sixteenth least recently decided, a few at a time: see
 *       {@link Eviction}. It takes keys out as removing does, with a compare-and-set on the state, so
 *       it needs no lock of the table's: during a resize it evicts from the old table's slots not moved yet or
 *       from the table being filled, and no new key waits for the copy to make room. When a key
 *       was last decided is in its state: when last admitted ({@link KeyState#time()}) and when last rejected or
 *       peeked at ({@link KeyState#lastUsed()}, which costs no memory).</li>
 * </ul>
 */
final class KeyTable {
    private static final Object TOMBSTONE = new Object();
    private static final Object RETIRED = new Object();
    private static final Object MOVED = new Object();
    private static final Object MOVING = new Object();
    private static final Object DROPPED = new Object();
    static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(Object[].class);
    private static final int MIN_CAPACITY = 16;
    /** Tables of at least this many slots count the room a resize keeps by keys, not slots alone. */
    private static final int COUNTED_ROOM = 1_024;
    /**
     * A table whose keys mostly come and go gets up to four times the capacity its live keys need, up to this
     * many slots (8 MB of array): see {@link #resize}.
     */
    private static final int CHURN_CAPACITY = 1 << 20;

    /** One generation of the table. */
    static final class Table {
        final Object[] slots; // key at 2i, state at 2i + 1
        /**
         * The hash of the key at 2i, {@link StoredKeys#NO_HASH} until its inserter has written it: a probe passes
         * another key by its hash, without reading that key's bytes (a cache miss each, on a big table).
         */
        final int[] hashes;
        final int mask;
        /** Key slots taken, by live keys or tombstones; past three quarters of the slots the table is resized. */
        final AtomicLong used = new AtomicLong();
        /** Keys with a state in this table: while a resize fills it, the keys not in it yet are the store's others. */
        final AtomicLong live = new AtomicLong();
        /** The table a resize under way copies this one into; set before the first slot is frozen. */
        volatile Table next;
        /** While a resize fills this table: the table it copies from; null once it is done. */
        volatile Table source;
        /** How many of this table's slots a resize has moved, published now and then (never ahead). */
        volatile int moved;
        /** 0 for the plain hash; else the secret base of the seeded hash (see "Keys chosen to collide"). */
        final long seed;
        /**
         * Whether keys come and go in it: the resize that made it dropped more keys than it kept. Such a table is
         * resized by the caller that finds it crowded, as before: its resize is mostly a sweep, which frees room at
         * once, and new keys going on in at up to seven eighths full while a thread of its own swept walked probes
         * four times as long (a million keys drawn at random, each back to untouched soon: 1.33 to 1.54 million
         * decisions a second against 1.85 to 2.0, measured by {@code ManyKeysBenchmark}).
         */
        final boolean churning;
        /** Whether its resize has been handed to the resizing thread. */
        final AtomicBoolean resizeAsked = new AtomicBoolean();

        Table(int capacity, long seed, boolean churning) {
            this.slots = new Object[2 * capacity];
            this.hashes = new int[capacity];
            this.mask = capacity - 1;
            this.seed = seed;
            this.churning = churning;
        }

        /** The hash of {@code key} in this table, given its {@linkplain StoredKeys#hashOf(String) plain hash}. */
        int hash(String key, int plain) {
            return seed == 0 ? plain : StoredKeys.seeded(key, seed);
        }

        /** The hash of a stored key in this table. */
        int hashOfStored(Object stored) {
            return seed == 0 ? StoredKeys.hashOf(stored) : StoredKeys.seeded(stored, seed);
        }

        long crowdedAt() {
            return (mask + 1L) / 4 * 3;
        }

        /** While a resize is under way new keys still go in, up to seven eighths of the slots. */
        long fullAt() {
            return (mask + 1L) / 8 * 7;
        }

        /** Slots a resize has not moved yet: each could still hold a key to copy into the next table. */
        long notMoved() {
            return mask + 1L - moved;
        }

        /**
         * Whether {@code next}, the table this one's resize fills, would keep too little room for the keys still to
         * come into it (copies, and new keys under way, this one included) were one more key to go in. Each such key
         * needs an old slot not moved yet or is being inserted; in a table of {@value #COUNTED_ROOM} slots or more,
         * each is also a key of the store not in {@code next} yet, which is the tighter count when old and new
         * tables are of one size. The store's size is read first and {@code used} last: a copy, a removal or an
         * insertion finished between the reads only makes the count larger (but for an insertion reserved after
         * the first read and finished before the second, one per thread, well within the eighth kept free); small
         * tables, whose free eighth is a few slots, count the slots alone.
         */
        boolean overfull(Table next, AtomicLong keys) {
            long toCome = notMoved();
            if (next.mask + 1 >= COUNTED_ROOM) {
                long store = keys.get();
                toCome = Math.min(toCome, store - next.live.get());
            }
            return next.used.get() + 1 + toCome > next.fullAt();
        }
    }

    private volatile Table table = new Table(MIN_CAPACITY, 0, false);
    private final AtomicLong size = new AtomicLong();
    /** No stored key expires before this (states only ever expire later after a decision). */
    private final AtomicLong firstExpiry = new AtomicLong(Long.MAX_VALUE);
    /**
     * The earliest expiry of the keys put in since the last sweep began: a sweep sets {@link #firstExpiry} to what it
     * saw, and folds this in after, so that a key put in behind it is not forgotten (a bug a review found).
     */
    private final AtomicLong sinceSweep = new AtomicLong(Long.MAX_VALUE);
    private final ReentrantLock maintenance = new ReentrantLock();
    /** Runs after each key a resize moves: tests pause a resize half-way with it. */
    volatile Runnable afterEachCopy;
    /** Runs once a resize has read the store's size, before it publishes the new table (tests). */
    volatile Runnable afterSizing;
    /** Runs once an insertion has claimed its key's slot, before it sets the key's state (tests). */
    volatile Runnable afterClaim;
    /** Runs once a sweep has looked at every key, before it notes the earliest expiry (tests). */
    volatile Runnable afterSweepLooked;
    private final long maxKeys;
    private final Eviction eviction = new Eviction(this);

    KeyTable(long maxKeys) {
        this.maxKeys = maxKeys;
    }

    /**
     * Decides a request on {@code key}: one compare-and-set on its state. If its insertion finds the table
     * crowded, keys expired {@code grace} before the decision's time are dropped.
     *
     * <p>The time is {@code now}, or, when {@code clock} is given, the clock read after the key has been found
     * (or found absent), on every attempt. A bug pinned: the time was read before the lookup, so a sweep by
     * another thread at a later reading could drop the key in between, and the key was then decided as fresh
     * at the earlier time, when its dropped state still counted (one request too many at a window's end).
     * Read after, the time of a key found absent is no earlier than that of any sweep that removed it.
     *
     * @param clock the store's clock, or {@code null} to decide at {@code now}
     * @return the decision, or {@code null} when the key is new, must be stored, and the table holds
     *         {@code maxKeys} keys already
     */
    Decision decide(Rule rule, String key, long cost, Clock clock, long now, long grace) {
        int plain = StoredKeys.hashOf(key);
        int collisions = 0;
        while (true) {
            Table tab = table;
            Object[] slots;
            int i;
            int hash;
            Object found;
            Object current = null;
            while (true) { // to the table that holds the key now, following a resize under way
                slots = tab.slots;
                int mask = tab.mask;
                hash = tab.hash(key, plain);
                i = hash & mask;
                int passed = 0;
                int twins = 0;
                while (true) {
                    found = SLOTS.getAcquire(slots, 2 * i);
                    if (found == null || found == MOVED || holds(tab, i, found, hash, key)) {
                        break;
                    }
                    passed++;
                    if (found != TOMBSTONE && tab.hashes[i] == hash) {
                        twins++; // a tombstone keeps its key's hash: a key removed and back again is no twin
                    }
                    i = (i + 1) & mask;
                }
                if ((twins > MOST_TWINS || passed > LONGEST_PROBE) && tab.seed == 0 && reseed(tab)) {
                    tab = table; // see "Keys chosen to collide"
                    continue;
                }
                if (found == MOVED) {
                    tab = tab.next; // not in this table: in the next one, if anywhere
                    continue;
                }
                if (found == null) {
                    break;
                }
                current = SLOTS.getAcquire(slots, 2 * i + 1);
                if (current == MOVING) {
                    awaitCopy(slots, 2 * i + 1);
                    continue;
                }
                if (current == MOVED || current == DROPPED) {
                    tab = tab.next;
                    continue;
                }
                break;
            }
            if (found == null) {
                long t = clock == null ? now : clock.nanos();
                Outcome outcome = rule.decide(null, t, cost);
                if (outcome.next() == null) {
                    return outcome.decision();
                }
                int inserted = insert(tab, i, key, hash, outcome.next(), t - grace);
                if (inserted == INSERTED) {
                    return outcome.decision();
                }
                if (inserted == NO_ROOM) {
                    return null;
                }
                continue;
            }
            if (current == RETIRED) {
                SLOTS.compareAndSet(slots, 2 * i, found, TOMBSTONE);
                continue;
            }
            KeyState state = (KeyState) current;
            Outcome outcome = rule.decide(state, clock == null ? now : clock.nanos(), cost);
            KeyState next = outcome.next();
            if (next == state) {
                if (state != null) { // null: a peek at a key whose inserter has not set its state yet
                    touch(state, outcome.time()); // a rejection or a peek: in use all the same, as nginx counts it
                }
                return outcome.decision();
            }
            // a key back to untouched is removed, never set back to null: a state slot goes from null only
            // once, so no compare-and-set can succeed on a null it read before the key was used again
            if (next == null ? retire(tab, 2 * i, found, state) : SLOTS.compareAndSet(slots, 2 * i + 1, state, next)) {
                if (state == null) {
                    // the key's first state, set here before its inserter could set its own: counted here, as the
                    // inserter would have (a bug a review found: its expiry went unnoted, and a store full of
                    // keys that reject or admit new ones took itself for full past that expiry)
                    tab.live.incrementAndGet();
                    inserted(next);
                }
                return outcome.decision();
            }
            backOff(++collisions);
        }
    }

    /** Waits while the state at {@code index} is being copied to the next table: one key's copy, not the table's. */
    private static void awaitCopy(Object[] slots, int index) {
        for (int spins = 0; SLOTS.getAcquire(slots, index) == MOVING; spins++) {
            if (spins < 1_000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    /**
     * Waits a little after losing a compare-and-set to another thread on the same key, twice as long each
     * time it happens again (up to a few microseconds). Without it two threads on one hot key take turns
     * pulling the key's cache line from each other on every decision and each decides at a fraction of its
     * speed alone; with it the winner makes a run of decisions while the line stays in its cache.
     */
    private static void backOff(int collisions) {
        for (int spins = 1 << Math.min(collisions + 4, 12); spins > 0; spins--) {
            Thread.onSpinWait();
        }
    }

    private static final int INSERTED = 0;
    private static final int RETRY = 1;
    private static final int NO_ROOM = 2;

    /** Puts a new key with its first state in, probing on from the empty slot {@code from}. */
    private int insert(Table tab, int from, String key, int hash, KeyState state, long sweepAt) {
        // reserved before looking for a resize under way: a resize that reads the store's size once it has
        // published its new table counts this key, or this thread sees that table (see resize)
        if (!reserve()) {
            return NO_ROOM;
        }
        Table next = tab.next;
        if (next != null && tab.overfull(next, size)) {
            size.decrementAndGet();
            return awaitResize(); // see "New keys during a resize"
        }
        long used = tab.used.incrementAndGet();
        Table source = tab.source;
        if (source != null && source.overfull(tab, size)) {
            tab.used.decrementAndGet();
            size.decrementAndGet();
            return awaitResize();
        }
        // crowded: resize, unless a resize is under way already, which will copy this key too (it freezes
        // every slot, so a key cannot land in a table after its copy); nobody waits for it while there is room.
        // A large table is resized by a thread of its own while this key goes in (see "Resizing off the caller")
        if (used > tab.crowdedAt() && used <= tab.fullAt() && tab.mask + 1 >= BACKGROUND_CAPACITY && !tab.churning) {
            resizeInBackground(tab, sweepAt);
        } else if (used > tab.crowdedAt() && (used > tab.fullAt() || !maintenance.isLocked())) {
            tab.used.decrementAndGet();
            size.decrementAndGet();
            resize(tab, sweepAt);
            return RETRY;
        }
        Object[] slots = tab.slots;
        Object stored = StoredKeys.compact(key);
        for (int i = from; ; i = (i + 1) & tab.mask) {
            Object found = SLOTS.getAcquire(slots, 2 * i);
            if (found == null && SLOTS.compareAndSet(slots, 2 * i, null, stored)) {
                tab.hashes[i] = hash; // published to deciders by the compare-and-set of the state below
                Runnable claimed = afterClaim;
                if (claimed != null) {
                    claimed.run();
                }
                if (!SLOTS.compareAndSet(slots, 2 * i + 1, null, state)) {
                    return RETRY; // the key is in, but someone decided on it first, or it is moving
                }
                tab.live.incrementAndGet();
                inserted(state);
                return INSERTED;
            }
            found = SLOTS.getAcquire(slots, 2 * i); // taken since: by this very key, by a resize, or another key
            if (found == MOVED || holds(tab, i, found, hash, key)) {
                tab.used.decrementAndGet();
                size.decrementAndGet();
                return RETRY;
            }
        }
    }

    /** Tables of at least this many slots are resized off the thread that found them crowded. */
    static final int BACKGROUND_CAPACITY = 1 << 16;
    /**
     * The thread that resizes large tables, for every store: resizes are rare, and one store's waits behind
     * another's only until that store's own callers, finding its table full, resize it themselves. It ends a
     * second after its last resize and holds no context class loader, so that an application redeployed in a
     * servlet container (sluice-servlet) leaves no thread of it behind.
     */
    private static final ExecutorService RESIZER = new ThreadPoolExecutor(
            0, 1, 1, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), task -> {
                Thread thread = new Thread(task, "sluice-key-table-resize");
                thread.setDaemon(true);
                thread.setContextClassLoader(null);
                return thread;
            });

    /** Hands the resize of {@code crowded} to {@link #RESIZER}, once. */
    private void resizeInBackground(Table crowded, long sweepAt) {
        if (crowded.resizeAsked.compareAndSet(false, true)) {
            RESIZER.execute(() -> resize(crowded, sweepAt));
        }
    }

    /** Waits for the resize under way (it holds {@link #maintenance}), for a new key that found no room. */
    private int awaitResize() {
        maintenance.lock();
        maintenance.unlock();
        return RETRY;
    }

    private boolean reserve() {
        while (true) {
            long keys = size.get();
            if (keys >= maxKeys) {
                return false;
            }
            if (size.compareAndSet(keys, keys + 1)) {
                return true;
            }
        }
    }

    private void inserted(KeyState state) {
        long expiresAt = state.expiresAt();
        if (expiresAt < sinceSweep.get()) {
            sinceSweep.accumulateAndGet(expiresAt, Math::min);
        }
        if (expiresAt < firstExpiry.get()) {
            firstExpiry.accumulateAndGet(expiresAt, Math::min);
        }
    }

    /**
     * Drops the keys of {@code full} that are untouched at {@code now} (the time of the request that found it
     * crowded) and copies the others into a new table, unless another thread already has.
     *
     * <p>The new table holds the live keys at a load of at most one half. But where most keys of the old one
     * were dropped, keys come and go (many keys, each asked about now and then, each untouched again soon
     * after): a table just big enough would fill with new keys again soon, and each resize would copy the
     * same few live keys again. Such a table gets four times that capacity (up to {@link #CHURN_CAPACITY}
     * slots), so it takes several times as many insertions before the next resize. A key that is asked
     * about again before then is still there, and costs one compare-and-set instead of an insertion.
     */
    private void resize(Table full, long now) {
        resize(full, now, full.seed);
    }

    /** {@link #resize(Table, long)} into a table hashed with {@code seed}. */
    private void resize(Table full, long now, long seed) {
        maintenance.lock();
        try {
            if (table != full) {
                return;
            }
            sweep(full, now);
            Object[] slots = full.slots;
            long live = size.get();
            if (afterSizing != null) {
                afterSizing.run();
            }
            boolean churning = full.used.get() - live > live;
            Table fresh = new Table(capacityFor(live, full.used.get()), seed, churning);
            fresh.source = full;
            full.next = fresh; // before any slot is frozen: whoever meets a frozen slot finds the next table
            // keys put into the old table while the new one was made, by threads that did not see it yet, are
            // counted now (each reserved its key first); until a slot is frozen no key goes into the new table,
            // so a bigger one may still take its place. A bug found in review: a table whose keys had nearly all
            // expired got a new table of a few slots, keys that came meanwhile outnumbered them, and the copy
            // looked for an empty slot forever, holding the lock
            long counted = size.get();
            int needed = capacityFor(counted, full.used.get());
            if (needed > fresh.mask + 1) {
                try {
                    fresh = new Table(needed, seed, churning);
                } catch (OutOfMemoryError e) {
                    full.next = null; // no slot frozen yet: the table stays as it was (a review found it wedged)
                    throw e;
                }
                fresh.source = full;
                full.next = fresh;
            }
            for (int i = 0; i < slots.length; i += 2) {
                if ((i & 127) == 0) {
                    full.moved = i / 2; // the slots before i are done with: no key of them is copied again
                }
                Object key = SLOTS.getAcquire(slots, i);
                while (key == null && !SLOTS.compareAndSet(slots, i, null, MOVED)) {
                    key = SLOTS.getAcquire(slots, i);
                }
                if (key == null || key == TOMBSTONE) {
                    continue; // empty (now frozen: a key that comes goes to the next table), or removed
                }
                Object state = SLOTS.getAcquire(slots, i + 1);
                while (state != RETIRED && !SLOTS.compareAndSet(slots, i + 1, state, MOVING)) {
                    state = SLOTS.getAcquire(slots, i + 1);
                }
                if (state == RETIRED) {
                    continue; // being removed by a thread that accounts for it
                }
                if (state == null) {
                    size.decrementAndGet(); // claimed but not yet set: its inserter starts over, in the next table
                    SLOTS.setRelease(slots, i + 1, DROPPED);
                    continue;
                }
                int hash = full.hashes[i / 2];
                if (hash == StoredKeys.NO_HASH || fresh.seed != full.seed) {
                    hash = fresh.hashOfStored(key); // not seen yet (though published), or another hash's
                }
                copy(fresh, key, hash, (KeyState) state);
                SLOTS.setRelease(slots, i + 1, MOVED); // after the copy: who finds MOVED finds the key in fresh
                if (afterEachCopy != null) {
                    afterEachCopy.run();
                }
            }
            full.moved = slots.length / 2;
            table = fresh;
            fresh.source = null;
        } finally {
            maintenance.unlock();
        }
    }

    /**
     * The slots of a table for {@code live} keys, where the old one had {@code used} slots taken: at most half
     * full, and four times that (up to {@link #CHURN_CAPACITY}) where keys come and go (see {@link #resize}).
     */
    private static int capacityFor(long live, long used) {
        int capacity = MIN_CAPACITY;
        while (capacity < (1 << 30) && capacity / 2 < live + 1) {
            capacity *= 2;
        }
        if (used - live > live) {
            capacity = Math.max(capacity, Math.min(4 * capacity, CHURN_CAPACITY));
        }
        return capacity;
    }

    /**
     * Puts a key being moved into {@code fresh}, where deciders may be putting new keys in at the same time
     * (never this one: while its old slot is {@link #MOVING} its deciders wait for it).
     */
    private static void copy(Table fresh, Object key, int hash, KeyState state) {
        Object[] slots = fresh.slots;
        for (int j = hash & fresh.mask; ; j = (j + 1) & fresh.mask) {
            if (SLOTS.compareAndSet(slots, 2 * j, null, key)) {
                fresh.hashes[j] = hash;
                SLOTS.setRelease(slots, 2 * j + 1, state);
                fresh.used.incrementAndGet();
                fresh.live.incrementAndGet();
                return;
            }
        }
    }

    /**
     * Removes every key of {@code tab} that is untouched at {@code now}, and notes the earliest expiry of those
     * left. Holds {@link #maintenance}.
     */
    private void sweep(Table tab, long now) {
        Object[] slots = tab.slots;
        long first = Long.MAX_VALUE;
        sinceSweep.set(Long.MAX_VALUE); // a key put in from here on may be behind the sweep: noted there
        for (int i = 0; i < slots.length; i += 2) {
            Object key = SLOTS.getAcquire(slots, i);
            if (key == null || key == TOMBSTONE || key == MOVED) {
                continue;
            }
            Object state = SLOTS.getAcquire(slots, i + 1);
            if (state == RETIRED || state == MOVED || state == MOVING || state == DROPPED) {
                continue;
            }
            if (state == null || ((KeyState) state).expired(now)) {
                if (retire(tab, i, key, state)) {
                    continue;
                }
                state = SLOTS.getAcquire(slots, i + 1);
            }
            if (state instanceof KeyState) {
                first = Math.min(first, ((KeyState) state).expiresAt());
            }
        }
        Runnable looked = afterSweepLooked;
        if (looked != null) {
            looked.run();
        }
        firstExpiry.set(first);
        firstExpiry.accumulateAndGet(sinceSweep.get(), Math::min); // after the set: what a key put in set meanwhile
    }

    /** Removes the key at slot index {@code i} (of the key) of {@code tab} if its state is still {@code state}. */
    boolean retire(Table tab, int i, Object key, Object state) {
        Object[] slots = tab.slots;
        if (!SLOTS.compareAndSet(slots, i + 1, state, RETIRED)) {
            return false;
        }
        SLOTS.compareAndSet(slots, i, key, TOMBSTONE);
        if (state != null) {
            tab.live.decrementAndGet(); // a key claimed and not yet set was never counted
        }
        size.decrementAndGet();
        return true;
    }

    /** Drops every key untouched at {@code now}. */
    void cleanUp(long now) {
        maintenance.lock();
        try {
            sweep(table, now);
        } finally {
            maintenance.unlock();
        }
    }

    /**
     * Makes room for a new key if a stored one has expired by {@code now}.
     *
     * @return whether there may be room now
     */
    boolean makeRoom(long now) {
        if (now < firstExpiry.get()) {
            // nothing can be dropped yet; but another thread's sweep may have made room since this thread found the
            // table full (a bug found by trying the library: a store with room rejected new keys as full)
            return size.get() < maxKeys;
        }
        cleanUp(now);
        return size.get() < maxKeys;
    }

    /**
     * The time a key was last decided, as kept in its state: nanoseconds in units of 2<sup>24</sup> (about
     * 16.8 ms), wrapping around. Two stamps are compared by their difference, which is right while they lie less
     * than 2<sup>31</sup> units (about 417 days) apart; a key idle longer than that under a limit longer still
     * may look recent, and then it is evicted later than its age says.
     */
    static int stampOf(long nanos) {
        return (int) (nanos >> STAMP_SHIFT);
    }

    private static final int STAMP_SHIFT = 24;

    /**
     * Notes that a key whose state stays {@code state} (a rejection, a peek) is decided at {@code now}; an admission
     * needs no note, since its new state's {@link KeyState#time()} is its time. It writes only when the stamp
     * moves, once every 16.8 ms at most, so a hot key being rejected does not pull its state's cache line from
     * core to core on every decision. The write is plain: two deciders that race write the same stamp or ones a
     * tick apart, and one that lands on a state just replaced only makes the key look a little older.
     */
    private static void touch(KeyState state, long now) {
        int stamp = stampOf(now);
        if (stamp == NEVER_USED) {
            stamp++; // a tick later, rather than never
        }
        if (state.lastUsed() != stamp) {
            state.used(stamp);
        }
    }

    /** {@link KeyState#lastUsed()} of a state no rejection or peek has met. */
    static final int NEVER_USED = 0;

    /** Makes room in a full table ({@link Eviction#evictLeastRecent}). */
    long evictLeastRecent(long now, long expiredBy) {
        return eviction.evictLeastRecent(now, expiredBy);
    }

    /** Keys evicted (not those dropped as expired) since the table was made. */
    long evicted() {
        return eviction.evicted();
    }

    /** The table in use (the eviction's). */
    Table current() {
        return table;
    }

    long maxKeys() {
        return maxKeys;
    }

    /** The longest run of taken key slots in the table in use (tests: what a probe may have to walk). */
    int longestRun() {
        Object[] slots = table.slots;
        int longest = 0;
        int run = 0;
        for (int i = 0; i < slots.length; i += 2) {
            run = SLOTS.getAcquire(slots, i) == null ? 0 : run + 1;
            longest = Math.max(longest, run);
        }
        return longest;
    }

    /** Whether a key slot and its state slot hold a key with a state (not one being inserted or removed). */
    static boolean isLive(Object key, Object state) {
        return key != null && key != TOMBSTONE && key != MOVED && state instanceof KeyState;
    }

    /** The earliest time at which a stored key may expire. */
    long firstExpiry() {
        return firstExpiry.get();
    }

    /** Forgets {@code key}. */
    void remove(String key) {
        int plain = StoredKeys.hashOf(key);
        Table tab = table;
        while (true) {
            Object[] slots = tab.slots;
            int hash = tab.hash(key, plain);
            int i = hash & tab.mask;
            Object found;
            while (true) {
                found = SLOTS.getAcquire(slots, 2 * i);
                if (found == null || found == MOVED || holds(tab, i, found, hash, key)) {
                    break;
                }
                i = (i + 1) & tab.mask;
            }
            if (found == null) {
                return;
            }
            Object state = found == MOVED ? MOVED : SLOTS.getAcquire(slots, 2 * i + 1);
            if (state == MOVING) {
                awaitCopy(slots, 2 * i + 1);
            } else if (state == MOVED || state == DROPPED) {
                tab = tab.next;
            } else if (state == RETIRED || retire(tab, 2 * i, found, state)) {
                return;
            } else {
                tab = table;
            }
        }
    }

    long size() {
        return size.get();
    }

    /** The slots of the table in use (tests see where a key's hash puts it: {@code hashOf(key) & (capacity - 1)}). */
    int capacity() {
        return table.mask + 1;
    }

    /** More keys of its own hash than this passed by one probe, and the table is hashed with a secret. */
    private static final int MOST_TWINS = 8;
    /**
     * More keys than this passed by one probe, and the table is hashed with a secret: keys made to fall on
     * neighbouring slots without sharing a hash. With the plain hash spread by a multiplication, 3,000,000 keys
     * named in sequence ({@code user-1}, {@code 10.0.0.1}, ...) never passed 256 (a run of linear probing at three
     * quarters full is this long by chance with odds about e^-38); without the multiplication they made runs of
     * over 8,192.
     */
    private static final int LONGEST_PROBE = 1_024;
    /**
     * Copies {@code crowded} into a table hashed with a new secret seed, dropping nothing (see "Keys chosen to
     * collide"); unless it is no longer the table in use, or a resize, sweep or eviction holds the table: a decider
     * never waits for those, and the next long probe tries again.
     *
     * @return whether the table was copied
     */
    private boolean reseed(Table crowded) {
        if (crowded.next != null || table != crowded || !maintenance.tryLock()) {
            return false;
        }
        try {
            if (table != crowded) {
                return false;
            }
            resize(crowded, Long.MIN_VALUE, new SecureRandom().nextLong(1L << 32, StoredKeys.PRIME));
            return true;
        } finally {
            maintenance.unlock();
        }
    }

    /** Whether the table in use is hashed with a secret (tests). */
    boolean seeded() {
        return table.seed != 0;
    }

    /**
     * Whether the key slot {@code i}, which holds {@code found}, holds {@code key}. A slot's hash is written
     * once, by the thread that put its key in (slots are never reused in one table), so a hash that differs
     * from {@link StoredKeys#NO_HASH} is the key's own: it tells another key apart without reading its bytes.
     */
    private static boolean holds(Table tab, int i, Object found, int hash, String key) {
        if (found == TOMBSTONE) {
            return false;
        }
        int stored = tab.hashes[i];
        return (stored == hash || stored == StoredKeys.NO_HASH) && StoredKeys.matches(found, key);
    }

}
