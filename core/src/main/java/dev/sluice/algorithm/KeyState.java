package dev.sluice.algorithm;

/**
 * The state of one key under one {@link Rule}: an immutable value a store keeps and swaps whole (but for the
 * note of when it was last used, {@link #lastUsed()}, which no decision reads).
 *
 * <p>Each algorithm's state is a subclass, so that a key with one limit (nearly every key) costs one object:
 * {@link Gcra.Tat}, {@link FixedWindow.Window}, ... A key with several limits holds a {@link Stack} of them.
 *
 * <p>{@code time} is the key's own clock, the time of its last admission: a request stamped earlier is
 * decided at this time instead, so time never runs backwards for a key. {@link #expiresAt()} is the time at
 * which the key is back to untouched if nothing else arrives ({@code time + reset_after}): from then on the
 * state can be dropped without changing any decision.
 */
public abstract sealed class KeyState
        permits Gcra.Tat, FixedWindow.Window, SlidingWindow.Counters, SlidingLog.Log, IntervalBucket.Tokens, KeyState.Stack {
    final long time;
    /**
     * When a request last found the key and left this state as it was (a rejection, a peek), in a store's own
     * units, 0 until then: the one field that is not part of the value. No decision reads it; a store that must
     * evict keys writes it (plainly: a lost write only makes the key look a little older) and, with {@link #time},
     * the last admission, evicts the keys idle longest. For a key of one limit it costs no memory: it fills the four
     * bytes the object header leaves before the first {@code long}. A {@link Stack} (a key of several limits)
     * had filled them with its array's reference, and takes 8 bytes more (40 instead of 32).
     */
    private int lastUsed;

    KeyState(long time) {
        this.time = time;
    }

    public final long time() {
        return time;
    }

    /** When a request last left this state unchanged, in the units of the store that wrote it with {@link #used}. */
    public final int lastUsed() {
        return lastUsed;
    }

    /** Notes when a request left this state unchanged (by a store that evicts the keys idle longest). */
    public final void used(int stamp) {
        lastUsed = stamp;
    }

    /** When the key is untouched again if nothing else arrives. */
    public abstract long expiresAt();

    /** Whether the state is untouched at {@code now} and can be dropped. */
    public final boolean expired(long now) {
        return now >= expiresAt();
    }

    /** The states of the limits of a key that has several. */
    static final class Stack extends KeyState {
        final KeyState[] limits;
        private final long expiresAt;

        Stack(long time, long expiresAt, KeyState[] limits) {
            super(time);
            this.expiresAt = expiresAt;
            this.limits = limits;
        }

        @Override
        public long expiresAt() {
            return expiresAt;
        }
    }
}
