package dev.sluice.server.config;

import dev.sluice.store.FailurePolicy;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code sluice.yaml} (spec/server.md), checked.
 *
 * @param store          {@code memory}, {@code redis://host:port[/db]} or {@code redis-cluster://h1:p1,h2:p2}
 * @param headers        which response headers to send
 * @param policies       the file's own policies, then those read from Envoy's configuration files
 * @param envoy          what Envoy's configuration files ({@code envoy_configs}) add besides their policies
 */
public record ServerConfig(String store, FailurePolicy onStoreFailure, long storeTimeoutNanos,
                           List<String> trustedProxies, Set<HeaderSet> headers, List<PolicyConfig> policies,
                           Envoy envoy) {
    /** The sets of rate limit response headers. */
    public enum HeaderSet {
        /** {@code RateLimit-Policy} and {@code RateLimit} (draft-ietf-httpapi-ratelimit-headers-10). */
        IETF,
        /** {@code X-RateLimit-Limit}, {@code X-RateLimit-Remaining}, {@code X-RateLimit-Reset}. */
        LEGACY
    }

    /** A configuration without Envoy's files. */
    public ServerConfig(String store, FailurePolicy onStoreFailure, long storeTimeoutNanos, List<String> trustedProxies,
                        Set<HeaderSet> headers, List<PolicyConfig> policies) {
        this(store, onStoreFailure, storeTimeoutNanos, trustedProxies, headers, policies, Envoy.NONE);
    }

    /**
     * What Envoy's rate limit configuration files add to the policies made of their limits.
     *
     * @param open     descriptor patterns without a limit ({@code unlimited: true}, or a leaf with no
     *                 {@code rate_limit}): a descriptor whose walk ends on one is {@code OK} and charged nothing,
     *                 and one that a pattern of them takes away from a less specific pattern is not charged by it
     * @param replaces for a policy, the names of the policies it replaces when both decide descriptors of one call
     * @param files    what each file and directory held when read (a directory: the names in it), to see a change
     */
    public record Envoy(List<PolicyConfig.Match> open, Map<String, List<String>> replaces, Map<Path, String> files) {
        public static final Envoy NONE = new Envoy(List.of(), Map.of(), Map.of());
    }

    public PolicyConfig policy(String name) {
        for (PolicyConfig policy : policies) {
            if (policy.name().equals(name)) {
                return policy;
            }
        }
        return null;
    }
}
