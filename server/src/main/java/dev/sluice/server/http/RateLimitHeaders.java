package dev.sluice.server.http;

import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.server.Checked;
import dev.sluice.server.config.ServerConfig;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The response headers of a decision (spec/server.md): the IETF draft's {@code RateLimit-Policy} (one item
 * per limit of every policy that decided) and {@code RateLimit} (the decision reported, the one closest to
 * rejecting), the legacy {@code X-RateLimit-*}, and {@code Retry-After} on every rejection that some wait can
 * cure (none when the cost can never fit: a Retry-After would be a lie). Durations are whole seconds, rounded up.
 */
public final class RateLimitHeaders {
    private RateLimitHeaders() {
    }

    public static Map<String, String> of(List<Checked> checked, Checked reported, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets) {
        Map<String, String> headers = new LinkedHashMap<>();
        if (reported == null) {
            return headers;
        }
        Decision decision = reported.decision();
        long reset = DurationFormat.toSecondsCeil(decision.resetAfterNanos());
        if (sets.contains(ServerConfig.HeaderSet.IETF)) {
            headers.put("RateLimit-Policy", checked.stream().flatMap(one -> one.policy().limits().stream()
                            .map(limit -> quoted(one) + ";q=" + limit.amount() + ";w="
                                    + DurationFormat.toSecondsCeil(limit.periodNanos())))
                    .collect(Collectors.joining(", ")));
            headers.put("RateLimit", quoted(reported) + ";r=" + decision.remaining() + ";t=" + reset);
        }
        if (sets.contains(ServerConfig.HeaderSet.LEGACY)) {
            headers.put("X-RateLimit-Limit", Long.toString(decision.limit().amount()));
            headers.put("X-RateLimit-Remaining", Long.toString(decision.remaining()));
            headers.put("X-RateLimit-Reset", Long.toString(reset));
        }
        if (rejected && !decision.never()) {
            headers.put("Retry-After", Long.toString(Math.max(0, DurationFormat.toSecondsCeil(decision.retryAfterNanos()))));
        }
        return headers;
    }

    private static String quoted(Checked checked) {
        return "\"" + checked.policy().name() + "\"";
    }
}
