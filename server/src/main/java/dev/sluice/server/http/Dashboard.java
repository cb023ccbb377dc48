package dev.sluice.server.http;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.metrics.Traffic;
import dev.sluice.server.request.KeyPart;
import dev.sluice.store.Store;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The dashboard ({@code GET /}): one page that polls {@code GET /v1/stats} every two seconds and draws, per
 * policy, the requests admitted and rejected each second over the last five minutes, the busiest keys of the
 * current minute and the one before, and the store's health and failure counts.
 */
final class Dashboard {
    private static final int SECONDS = 300;
    private static final int TOP = 10;
    private static final String PAGE = load();

    private final LiveConfig live;

    Dashboard(LiveConfig live) {
        this.live = live;
    }

    static String page() {
        return PAGE;
    }

    private static String load() {
        try (InputStream in = Dashboard.class.getResourceAsStream("dashboard.html")) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    boolean storeHealthy() {
        Store store = live.store();
        return !(store instanceof RedisStore redis) || redis.healthy();
    }

    ObjectNode stats(Policies policies) {
        Traffic traffic = live.metrics().traffic();
        ObjectNode stats = VerdictAnswer.JSON.createObjectNode();
        ObjectNode store = stats.putObject("store").put("uri", policies.config().storeShown()).put("healthy", storeHealthy());
        if (live.store() instanceof RedisStore redis) {
            RedisStore.Counts counts = redis.counts();
            store.put("failures", counts.failures()).put("timeouts", counts.timeouts())
                    .put("failed_open", counts.failedOpen()).put("failed_closed", counts.failedClosed())
                    .put("short_circuited", counts.shortCircuited());
        }
        ArrayNode list = stats.putArray("policies");
        for (PolicyConfig policy : policies.config().policies()) {
            ObjectNode item = list.addObject().put("name", policy.name())
                    .put("mode", policy.mode());
            ArrayNode seconds = item.putArray("seconds");
            for (Traffic.Second second : traffic.seconds(policy.name(), SECONDS)) {
                seconds.addArray().add(second.epochSecond()).add(second.admitted()).add(second.rejected());
            }
            ArrayNode top = item.putArray("top_keys");
            boolean[] masked = policies.config().dashboardKeysShown() ? null : masked(policy);
            for (Traffic.KeyCount key : traffic.topKeys(policy.name(), TOP)) {
                top.addObject().put("key", masked == null ? key.key() : shown(key.key(), masked))
                        .put("requests", key.requests()).put("rejected", key.rejected());
            }
        }
        return stats;
    }

    /**
     * Which parts of {@code policy}'s key a client may hold a secret in, and so are masked ({@code dashboard_keys:
     * masked}, the default): a header's, a cookie's, a query parameter's, a user's, a descriptor's value (an API key,
     * a session). The busiest keys were served whole by {@code /v1/stats}, which answers anyone who reaches the port:
     * with a policy keyed by {@code header:X-API-Key}, the ten busiest API keys (a review found it). Null: none.
     */
    private static boolean[] masked(PolicyConfig policy) {
        boolean[] masked = new boolean[policy.key().size()];
        boolean any = false;
        for (int i = 0; i < masked.length; i++) {
            KeyPart part = policy.key().get(i);
            masked[i] = part instanceof KeyPart.Header || part instanceof KeyPart.Cookie
                    || part instanceof KeyPart.Query || part instanceof KeyPart.User
                    || part instanceof KeyPart.DescriptorValue;
            any |= masked[i];
        }
        return any ? masked : null;
    }

    /**
     * {@code key} with its parts at {@code masked} masked: a long value keeps its first 4 characters, and each is
     * followed by the first 8 hex digits of its SHA-256, so that an operator tells keys apart and finds one they hold,
     * and nobody can use one. A key that is not the policy's parts joined ({@code /v1/check} names keys as it likes)
     * is masked whole.
     */
    static String shown(String key, boolean[] masked) {
        String[] parts = key.split("\\|", -1);
        if (parts.length != masked.length) {
            return mask(key);
        }
        for (int i = 0; i < parts.length; i++) {
            if (masked[i]) {
                parts[i] = mask(parts[i]);
            }
        }
        return String.join("|", parts);
    }

    private static String mask(String value) {
        if (value.isEmpty()) {
            return value; // a part missing: nothing to hide
        }
        byte[] digest;
        try {
            digest = java.security.MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e); // every JVM has it
        }
        String hash = java.util.HexFormat.of().formatHex(digest, 0, 4);
        return (value.length() >= 12 ? value.substring(0, 4) : "") + "…" + hash;
    }
}
