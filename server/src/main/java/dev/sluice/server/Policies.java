package dev.sluice.server;

import dev.sluice.RateLimiter;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The policies in force, each a limiter on the one store of the server. A key is stored under its policy's
 * name ({@code api-per-key:user-42}), so policies never share state.
 */
public final class Policies implements AutoCloseable {
    private final ServerConfig config;
    private final Store store;
    private final Map<String, RateLimiter> limiters = new LinkedHashMap<>();

    public Policies(ServerConfig config) {
        this.config = config;
        this.store = config.store().equals("memory") ? new InMemoryStore()
                : RedisStore.builder(config.store()).timeout(Duration.ofNanos(config.storeTimeoutNanos()))
                        .onFailure(config.onStoreFailure()).build();
        for (PolicyConfig policy : config.policies()) {
            limiters.put(policy.name(), RateLimiter.builder().rule(policy.rule()).store(store).build());
        }
    }

    public ServerConfig config() {
        return config;
    }

    public PolicyConfig policy(String name) {
        return config.policy(name);
    }

    public RateLimiter limiter(String policy) {
        return limiters.get(policy);
    }

    /** The key a policy's limiter stores {@code key} under. */
    public static String storedKey(String policy, String key) {
        return policy + ":" + key;
    }

    @Override
    public void close() throws Exception {
        if (store instanceof AutoCloseable) {
            ((AutoCloseable) store).close();
        }
    }
}
