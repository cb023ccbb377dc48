package dev.sluice.algorithm;

/**
 * The state of one key under one {@link Rule}: an immutable value a store keeps and swaps whole.
 *
 * <p>{@code time} is the key's own clock, the time of its last admission: a request stamped earlier is
 * decided at this time instead, so time never runs backwards for a key. {@code expiresAt} is the time at
 * which every limit is back to untouched if nothing else arrives ({@code time + reset_after}): from then on
 * the state can be dropped without changing any decision.
 */
public final class KeyState {
    private final long time;
    private final long expiresAt;
    /** The state of the only limit, or an {@code Object[]} of the states of several. */
    private final Object limits;

    KeyState(long time, long expiresAt, Object limits) {
        this.time = time;
        this.expiresAt = expiresAt;
        this.limits = limits;
    }

    public long time() {
        return time;
    }

    public long expiresAt() {
        return expiresAt;
    }

    /** Whether the state is untouched at {@code now} and can be dropped. */
    public boolean expired(long now) {
        return now >= expiresAt;
    }

    /** The state of the only limit. */
    Object single() {
        return limits;
    }

    /** The state of limit {@code index} of several. */
    Object limit(int index) {
        return ((Object[]) limits)[index];
    }

    int limitCount() {
        return limits instanceof Object[] ? ((Object[]) limits).length : 1;
    }
}
