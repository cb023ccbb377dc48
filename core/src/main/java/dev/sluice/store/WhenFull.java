package dev.sluice.store;

/** What the in-memory store answers for a new key when it already holds its maximum number of keys. */
public enum WhenFull {
    /**
     * Evict keys among the sixteenth least recently decided, a few at a time, and store the new key (the default,
     * as nginx's {@code limit_req} removes the least recently used state when its zone is full). A flood of new keys
     * cannot grow the heap nor shut new clients out; what it costs is the state of the keys idle longest, which
     * start afresh when they come back (each one counted: {@link InMemoryStore#evicted()}).
     */
    EVICT,
    /**
     * Reject the request: known keys keep being decided exactly, and a flood of new keys cannot grow the heap,
     * but every new key is rejected until a stored one expires, which under limits of a day is a day.
     * {@code retry_after} is the wait until the first stored key expires and makes room.
     */
    REJECT,
    /** Decide the request as if the key were untouched and do not store it: new keys are not limited. */
    ADMIT
}
