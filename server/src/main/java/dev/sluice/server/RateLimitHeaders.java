package dev.sluice.server;

import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;

import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The response headers of a decision (docs/server.md): the IETF draft's {@code RateLimit-Policy} (one item
 * per limit of every enforced policy that decided) and {@code RateLimit} (the decision reported, the one closest
 * to rejecting), the legacy {@code X-RateLimit-*}, and {@code Retry-After} on every rejection that some wait can
 * cure (none when the cost can never fit: a Retry-After would be a lie). Durations are whole seconds, rounded up.
 * A concurrency policy's item is its places in flight, {@code q=10;qu="concurrent-requests"}, with no window.
 *
 * <p>Shadow policies never show: a limit being tried out must not make clients that honour these headers hold
 * back. A request that only shadow policies decided gets no rate limit headers, as one no policy matched.
 *
 * <p>The reset reported ({@code t}, {@code X-RateLimit-Reset}) is that of the limit the headers name beside it,
 * not the key's: a key under 600/1m and 3600/1h that is closest to its minute limit resets that limit within a
 * minute, though the key is untouched only an hour later.
 */
public final class RateLimitHeaders {
    private RateLimitHeaders() {
    }

    /** @param heldNanos how long after the decision the answer leaves (a request held for its delay), 0 at once */
    public static Map<String, String> of(List<Checked> checked, Checked reported, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets, long heldNanos) {
        return of(checked, reported, rejected, sets, heldNanos, false);
    }

    /**
     * @param rejectionLeavesNone a rejection tells nothing remaining, as the statuses of Envoy's rate limit service do
     *                            beside these headers (a review found {@code limit_remaining: 0} next to
     *                            {@code X-RateLimit-Remaining: 100} for hits that could never fit); the HTTP API tells
     *                            what is left for a smaller cost
     */
    public static Map<String, String> of(List<Checked> checked, Checked reported, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets, long heldNanos,
                                         boolean rejectionLeavesNone) {
        Map<String, String> headers = new LinkedHashMap<>();
        if (reported == null || reported.policy().shadow()) {
            return headers;
        }
        Decision decision = reported.decision();
        // a store that did not answer: nothing is known of the key, and a quota shown (full, as fail-open decides it)
        // would tell clients to go ahead; fail-closed's wait until the store is tried again is still told
        boolean quotaKnown = !decision.storeFailed();
        long reset = DurationFormat.toSecondsCeil(Math.max(0, decision.limitResetAfterNanos() - heldNanos));
        long remaining = rejected && rejectionLeavesNone ? 0 : decision.remaining();
        if (quotaKnown && sets.contains(ServerConfig.HeaderSet.IETF)) {
            headers.put("RateLimit-Policy", policyItems(checked));
            headers.put("RateLimit", quote(new StringBuilder(), reported).append(";r=").append(remaining)
                    .append(";t=").append(reset).toString());
        }
        if (quotaKnown && sets.contains(ServerConfig.HeaderSet.LEGACY)) {
            headers.put("X-RateLimit-Limit", Long.toString(decision.limit().amount()));
            headers.put("X-RateLimit-Remaining", Long.toString(remaining));
            headers.put("X-RateLimit-Reset", Long.toString(reset));
        }
        if (rejected && !decision.never()) {
            headers.put("Retry-After", Long.toString(Math.max(0, DurationFormat.toSecondsCeil(decision.retryAfterNanos()))));
        }
        return headers;
    }

    /**
     * One item per limit of every enforced policy that decided, in one builder: a JFR allocation profile of the gateway at
     * half load found this header, made with a stream and a string per item, making a tenth of Sluice's garbage. A
     * policy that decided several keys of one request (two of Envoy's descriptors it matches, or overrides of the same
     * limit) is listed once: the header tells the quota, not how often it was charged (a review found it repeated).
     */
    private static String policyItems(List<Checked> checked) {
        StringBuilder items = new StringBuilder(64);
        // a request of the gateway has a handful of policies, looked back over; a call of Envoy's up to 10,000
        Set<List<Object>> listed = checked.size() > FEW ? new HashSet<>() : null;
        for (int i = 0; i < checked.size(); i++) {
            Checked one = checked.get(i);
            if (one.policy().shadow() || (listed != null ? !listed.add(itemsOf(one)) : listedBefore(checked, i))) {
                continue;
            }
            for (Limit limit : one.policy().limits()) {
                if (!items.isEmpty()) {
                    items.append(", ");
                }
                quote(items, one).append(";q=").append(limit.amount());
                if (one.policy().inFlight() != null) {
                    // places in flight, not requests in a window: the draft's own unit for them, and no window (a
                    // review found q=10;w=30 telling clients ten requests every thirty seconds)
                    items.append(";qu=\"concurrent-requests\"");
                } else {
                    items.append(";w=").append(DurationFormat.toSecondsCeil(limit.periodNanos()));
                }
            }
        }
        return items.toString();
    }

    /** Up to this many decisions, a repeated policy is found by looking back over those before it. */
    private static final int FEW = 16;

    /** Whether a decision before the {@code i}th wrote the same items: the same policy, or one of the same quota. */
    private static boolean listedBefore(List<Checked> checked, int i) {
        PolicyConfig policy = checked.get(i).policy();
        for (int j = 0; j < i; j++) {
            PolicyConfig earlier = checked.get(j).policy();
            // names first: those of sluice.yaml differ, so the gateway's policies part at once, allocating nothing
            if (earlier == policy || earlier.name().equals(policy.name())
                    && (earlier.inFlight() == null) == (policy.inFlight() == null)
                    && earlier.limits().equals(policy.limits())) {
                return true;
            }
        }
        return false;
    }

    /** What a decision's items say: its policy's name, its limits, and whether they are places in flight. */
    private static List<Object> itemsOf(Checked checked) {
        PolicyConfig policy = checked.policy();
        return List.of(policy.name(), policy.limits(), policy.inFlight() != null);
    }

    /** Appends the policy's name as a structured-field string: {@code "name"}. */
    private static StringBuilder quote(StringBuilder to, Checked checked) {
        return to.append('"').append(checked.policy().name()).append('"');
    }
}
