package dev.sluice.server.http;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.Sha256;
import dev.sluice.server.metrics.Traffic;
import dev.sluice.server.request.KeyPart;
import dev.sluice.store.Store;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.List;

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
        ObjectNode stats = JsonNodeFactory.instance.objectNode();
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
            boolean whole = policies.config().dashboardKeysShown();
            for (Traffic.KeyCount key : traffic.topKeys(policy.name(), TOP)) {
                top.addObject().put("key", whole ? key.key() : shown(key.key(), policy.key()))
                        .put("requests", key.requests()).put("rejected", key.rejected());
            }
        }
        return stats;
    }

    /**
     * {@code key}, a key of a policy keyed by {@code parts}, as the dashboard shows it ({@code dashboard_keys: masked},
     * the default): the parts a client may hold a secret in (a header's, a cookie's, a query parameter's, a user's, a
     * descriptor's value: an API key, a session) masked, and the others (an address, a route, a method, a host, a
     * constant) shown where they look like one. The busiest keys were served whole by {@code /v1/stats}, which answers
     * anyone who reaches the port: with a policy keyed by {@code header:X-API-Key}, the ten busiest API keys (a review
     * found it). {@code /v1/check} names keys as its caller likes ({@code "sk_live_..."} for a policy keyed by
     * {@code ip}): a part that does not look like what its kind gives, or a key that is not the parts joined, is
     * masked.
     */
    static String shown(String key, List<KeyPart> parts) {
        String[] values = key.split("\\|", -1);
        if (values.length != parts.size()) {
            return mask(key);
        }
        for (int i = 0; i < values.length; i++) {
            if (!plain(parts.get(i), values[i])) {
                values[i] = mask(values[i]);
            }
        }
        return String.join("|", values);
    }

    /**
     * An IPv4 address, or an IPv6 one (a colon at least: hex alone is an API key's look as much as an address's), or
     * nothing (a part missing).
     */
    private static final java.util.regex.Pattern ADDRESS = java.util.regex.Pattern.compile(
            "|(?:\\d{1,3}\\.){3}\\d{1,3}|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*");
    private static final java.util.regex.Pattern METHOD = java.util.regex.Pattern.compile("[A-Z]{0,20}");
    /** A host name of two labels or more (a UUID, a token of one, is no host's look), an IPv6 literal, or nothing. */
    private static final java.util.regex.Pattern HOST = java.util.regex.Pattern.compile(
            "|(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|\\[[0-9a-f:.]+]");

    /** Whether {@code value} of {@code part} is shown as it is: a part that holds no secret, looking like its kind. */
    private static boolean plain(KeyPart part, String value) {
        if (part instanceof KeyPart.Ip) {
            return ADDRESS.matcher(value).matches();
        }
        if (part instanceof KeyPart.Route) {
            return value.isEmpty() || value.startsWith("/");
        }
        if (part instanceof KeyPart.Method) {
            return METHOD.matcher(value).matches();
        }
        if (part instanceof KeyPart.Host) {
            return value.length() <= 253 && HOST.matcher(value).matches();
        }
        if (part instanceof KeyPart.Const constant) { // as the key holds it, its | and % escaped
            return value.contentEquals(KeyPart.escaped(new StringBuilder(), constant.text()));
        }
        return false; // a header, a cookie, a query parameter, a user, a descriptor's value
    }

    /**
     * {@code value} masked: the first 8 hex digits of its SHA-256, so that an operator tells keys apart and finds one
     * they hold, and nobody can use one; a value of 24 characters or more keeps its first 4 (an API key's prefix, with
     * 20 characters or more still unknown: a shorter one, a PIN, would be guessed through its hash).
     */
    static String mask(String value) {
        if (value.isEmpty()) {
            return value; // a part missing: nothing to hide
        }
        String hash = Sha256.hex(value).substring(0, 8);
        return (value.length() >= 24 ? value.substring(0, 4) : "") + "…" + hash;
    }
}
