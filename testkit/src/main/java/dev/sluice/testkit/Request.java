package dev.sluice.testkit;

/** One line of a trace: a request of {@code cost} on {@code key} at {@code nanos} since the epoch. */
public record Request(long nanos, String key, long cost) {
}
