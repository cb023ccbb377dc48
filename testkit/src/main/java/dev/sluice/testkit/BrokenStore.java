package dev.sluice.testkit;

import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;

/**
 * A store with a bug: every decision throws {@link IllegalStateException}. Not a store that is down (that is
 * {@code StoreUnavailableException}, which the failure policy decides), but a fault of Sluice's own, which whatever
 * asks the store must answer as one (a 500 and a line in the log) and never take for a decision.
 */
public final class BrokenStore implements Store {
    /** The message every decision throws with. */
    public static final String FAULT = "a bug in the store";

    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        throw new IllegalStateException(FAULT);
    }

    @Override
    public void reset(Rule rule, String key) {
    }
}
