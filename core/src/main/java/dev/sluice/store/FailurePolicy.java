package dev.sluice.store;

/** What a store that cannot answer in time decides (docs/server.md, {@code on_store_failure}). */
public enum FailurePolicy {
    /** Admit, as if the key were untouched: an outage of the store does not become an outage of the API. */
    OPEN,
    /** Reject, with {@code retry_after} (and {@code reset_after}) the wait until the store is tried again. */
    CLOSED
}
