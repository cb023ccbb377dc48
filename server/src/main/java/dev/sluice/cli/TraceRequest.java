package dev.sluice.cli;

/** One line of a trace: {@code t_ms}, {@code key}, {@code cost}. */
record TraceRequest(long millis, String key, long cost) {
}
