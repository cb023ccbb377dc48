package dev.sluice.store;

/** What the in-memory store answers for a new key when it already holds its maximum number of keys. */
public enum WhenFull {
    /**
     * Reject the request (the default, as nginx's {@code limit_req} does when its zone is full): known keys
     * keep being decided exactly, and a flood of new keys cannot grow the heap. {@code retry_after} is the
     * wait until the first stored key expires and makes room.
     */
    REJECT,
    /** Decide the request as if the key were untouched and do not store it: new keys are not limited. */
    ADMIT
}
