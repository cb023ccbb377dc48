package dev.sluice.server.http;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.metrics.Traffic;
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
            for (Traffic.KeyCount key : traffic.topKeys(policy.name(), TOP)) {
                top.addObject().put("key", key.key()).put("requests", key.requests()).put("rejected", key.rejected());
            }
        }
        return stats;
    }
}
