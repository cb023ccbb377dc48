package dev.sluice.server.config;

import dev.sluice.algorithm.Rule;

import java.util.List;

/**
 * One policy of {@code sluice.yaml}: which requests, which key, which limits, and what to do with a request
 * that does not fit.
 *
 * @param name          unique within the file
 * @param key           the parts of the key: {@code ip}, {@code header:NAME}, {@code query:NAME}, {@code route},
 *                      {@code method}, {@code host}, {@code const:TEXT}
 * @param rule          the algorithm, the limits and the mode the limiter enforces ({@code shadow} decides as
 *                      {@code reject})
 * @param cost          a fixed cost, unless {@code costHeader} names the request header that carries it
 * @param shadow        decide and count, but never reject
 */
public record PolicyConfig(String name, Match match, List<String> key, Rule rule, long cost, String costHeader,
                           boolean shadow, boolean skipIfMissing) {
    /** Which requests a policy applies to; {@code null} fields match everything. */
    public record Match(String path, List<String> methods, String host) {
        public static final Match ALL = new Match(null, null, null);
    }
}
