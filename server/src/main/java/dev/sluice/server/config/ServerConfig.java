package dev.sluice.server.config;

import dev.sluice.redis.RedisStore;
import dev.sluice.store.FailurePolicy;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code sluice.yaml} (docs/server.md), checked.
 *
 * @param store          {@code memory}, {@code redis://host:port[/db]} or {@code redis-cluster://h1:p1,h2:p2}
 * @param maxKeys        the most keys the in-memory store holds; full, it evicts those decided least recently
 * @param headers        which response headers to send
 * @param envoyHeaders   which of them to hand Envoy in the answers of its rate limit service (none unless told, as
 *                       Envoy's own service; Retry-After on a call over the limit whatever this says)
 * @param policies       the file's own policies, then those read from Envoy's configuration files
 * @param envoy          what Envoy's configuration files ({@code envoy_configs}) add besides their policies
 * @param storeLine      the line of {@code store:} in the file, for a store that cannot be reached; 0 without one
 * @param storeTrust     the certificates (PEM) a TLS store's server must be signed by; null: the JVM's trust store
 * @param storeInBackground {@code store_connect: background}: a Redis that cannot be reached as the store is opened
 *                       is connected to in the background, each decision meanwhile {@code on_store_failure}'s
 * @param storePassword  the Redis store's password given apart from its address ({@code store_password_file},
 *                       {@code store_password_env}); null without one
 * @param dashboardKeysShown {@code dashboard_keys: shown}: the dashboard's busiest keys shown whole; by default the
 *                       parts a client may hold a secret in (a header, a cookie, a query parameter, a user, a
 *                       descriptor's value) are masked
 */
public record ServerConfig(String store, FailurePolicy onStoreFailure, long storeTimeoutNanos, long maxKeys,
                           List<String> trustedProxies, Set<HeaderSet> headers, Set<HeaderSet> envoyHeaders,
                           List<PolicyConfig> policies, Envoy envoy, int storeLine, java.nio.file.Path storeTrust,
                           boolean storeInBackground, StorePassword storePassword, boolean dashboardKeysShown) {
    /**
     * A password read from a secret: where from ({@code file}: the file, watched as the configuration is, so that a
     * secret rotated in place opens a new store; or the environment variable), and what it is, never shown.
     */
    public record StorePassword(java.nio.file.Path file, String variable, String value) {
        @Override
        public String toString() {
            return "password from " + (file != null ? file : "$" + variable); // a record would print the password
        }

        /** What tells two passwords apart, without the password itself: its SHA-256. */
        public String fingerprint() {
            return Sha256.hex(value);
        }
    }

    /** The sets of rate limit response headers. */
    public enum HeaderSet {
        /** {@code RateLimit-Policy} and {@code RateLimit} (draft-ietf-httpapi-ratelimit-headers-10). */
        IETF,
        /** {@code X-RateLimit-Limit}, {@code X-RateLimit-Remaining}, {@code X-RateLimit-Reset}. */
        LEGACY
    }

    /**
     * What Envoy's rate limit configuration files add to the policies made of their limits.
     *
     * @param patterns    every descriptor pattern of the files, in file order, those without a limit too
     *                    ({@code unlimited: true}, a node without {@code rate_limit}): the walk of a descriptor
     *                    ({@code Descriptor.walk}) goes through them all, and one that ends on a pattern without a
     *                    policy is {@code OK}, charged nothing
     * @param replaces    for a pattern whose limit {@code replaces} others, their names: when a descriptor of a call
     *                    ends on it, the policies of those names are not charged for that call
     * @param replaceable the names that {@code replaces} can take away: those given as {@code rate_limit.name}
     * @param blocked     the patterns of a limit of 0 requests ({@code requests_per_unit: 0}, or none given), not in
     *                    shadow mode: a call with a hit for a descriptor whose walk ends on one is over the limit
     *                    whole, and charges nothing, as a limit of 0 a call brings; no policy stands for it
     * @param unlimited   the patterns of {@code unlimited: true}: a descriptor that ends on one is OK, with all a
     *                    uint32 holds remaining, as Envoy's service answers it
     * @param domains     every domain the files configure, those without descriptors too: a limit a call brings for
     *                    a descriptor (Envoy's override) applies in any of them, as in Envoy's service
     * @param files       what each file and directory held when read (a directory: the files under it), to see a
     *                    change
     */
    public record Envoy(List<PolicyConfig.Match> patterns, Map<PolicyConfig.Match, List<String>> replaces,
                        Set<String> replaceable, Map<PolicyConfig.Match, Blocked> blocked,
                        Set<PolicyConfig.Match> unlimited, Set<String> domains, Map<Path, String> files) {
        public static final Envoy NONE = new Envoy(List.of(), Map.of(), Set.of(), Map.of(), Set.of(), Set.of(),
                Map.of());

        /** A limit of 0 requests: its name (given, or made from its path) and its unit. */
        public record Blocked(String name, EnvoyUnit unit) {
        }
    }

    /** {@code store: memory}: the built-in in-memory store, the default; any other store is a Redis address. */
    public static final String MEMORY = "memory";

    /** Whether {@code store} names the in-memory store (else it is a Redis address). */
    public static boolean inMemory(String store) {
        return store.equals(MEMORY);
    }

    /** Whether this configuration's store is the in-memory one. */
    public boolean inMemory() {
        return inMemory(store);
    }

    /**
     * {@link #store} as it may be shown to anyone (the health check, the dashboard, start-up lines, messages): a
     * password in a Redis URI ({@code redis://:secret@host}, {@code redis://user:secret@host}, Lettuce's
     * {@code redis://secret@host}) is written {@code ****}, as {@code /healthz} is commonly open to every prober.
     */
    public String storeShown() {
        return RedisStore.shown(store);
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
