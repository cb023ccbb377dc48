package dev.sluice.server.http;

import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The response headers of a decision (spec/server.md): the IETF draft's {@code RateLimit-Policy} (one item
 * per limit) and {@code RateLimit} (the limit closest to rejecting), the legacy {@code X-RateLimit-*}, and
 * {@code Retry-After} on every rejection. Durations are whole seconds, rounded up.
 */
public final class RateLimitHeaders {
    private RateLimitHeaders() {
    }

    public static Map<String, String> of(PolicyConfig policy, Decision decision, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets) {
        Map<String, String> headers = new LinkedHashMap<>();
        String name = "\"" + policy.name() + "\"";
        long reset = DurationFormat.toSecondsCeil(decision.resetAfterNanos());
        if (sets.contains(ServerConfig.HeaderSet.IETF)) {
            headers.put("RateLimit-Policy", policy.rule().limits().stream()
                    .map(limit -> name + ";q=" + limit.amount() + ";w=" + DurationFormat.toSecondsCeil(limit.periodNanos()))
                    .collect(Collectors.joining(", ")));
            headers.put("RateLimit", name + ";r=" + decision.remaining() + ";t=" + reset);
        }
        if (sets.contains(ServerConfig.HeaderSet.LEGACY)) {
            Limit limit = decision.limit();
            headers.put("X-RateLimit-Limit", Long.toString(limit.amount()));
            headers.put("X-RateLimit-Remaining", Long.toString(decision.remaining()));
            headers.put("X-RateLimit-Reset", Long.toString(reset));
        }
        if (rejected) {
            headers.put("Retry-After", Long.toString(Math.max(0, DurationFormat.toSecondsCeil(decision.retryAfterNanos()))));
        }
        return headers;
    }
}
