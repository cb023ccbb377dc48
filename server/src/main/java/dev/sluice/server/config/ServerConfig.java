package dev.sluice.server.config;

import dev.sluice.store.FailurePolicy;

import java.util.List;
import java.util.Set;

/**
 * {@code sluice.yaml} (spec/server.md), checked.
 *
 * @param store          {@code memory}, {@code redis://host:port[/db]} or {@code redis-cluster://h1:p1,h2:p2}
 * @param headers        which response headers to send
 */
public record ServerConfig(String store, FailurePolicy onStoreFailure, long storeTimeoutNanos,
                           List<String> trustedProxies, Set<HeaderSet> headers, List<PolicyConfig> policies) {
    /** The sets of rate limit response headers. */
    public enum HeaderSet {
        /** {@code RateLimit-Policy} and {@code RateLimit} (draft-ietf-httpapi-ratelimit-headers-10). */
        IETF,
        /** {@code X-RateLimit-Limit}, {@code X-RateLimit-Remaining}, {@code X-RateLimit-Reset}. */
        LEGACY
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
