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
 * minute, though the key is untouched only an hour later. On a rejection, {@code t} is no later than
 * {@code Retry-After}. Every item is named by its policy, as spec/server.md writes them ({@link #name}).
 */
public final class RateLimitHeaders {
    private RateLimitHeaders() {
    }

    /** @param heldNanos how long after the decision the answer leaves (a request held for its delay), 0 at once */
    public static Map<String, String> of(List<Checked> checked, Checked reported, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets, long heldNanos) {
        return of(checked, reported, rejected, sets, heldNanos, null);
    }

    /** The reset a status of Envoy's rate limit service tells for a decision, in nanoseconds. */
    @FunctionalInterface
    public interface StatusReset {
        long nanos(Checked reported, boolean rejected);
    }

    /**
     * @param statusReset for the headers handed to Envoy beside its rate limit service's statuses, the reset those
     *                    tell, which the headers tell too, and a rejection tells nothing remaining, as they do (a
     *                    review found {@code limit_remaining: 0} next to {@code X-RateLimit-Remaining: 100} for hits
     *                    that could never fit, and then {@code t=0} next to a status's end of the window on a key not
     *                    charged yet); null for the HTTP faces, which tell what is left for a smaller cost, and the
     *                    decision's own reset
     */
    public static Map<String, String> of(List<Checked> checked, Checked reported, boolean rejected,
                                         Set<ServerConfig.HeaderSet> sets, long heldNanos, StatusReset statusReset) {
        Map<String, String> headers = new LinkedHashMap<>();
        if (reported == null || reported.policy().shadow()) {
            return headers;
        }
        Decision decision = reported.decision();
        // a store that did not answer: nothing is known of the key, and a quota shown (full, as fail-open decides it)
        // would tell clients to go ahead; fail-closed's wait until the store is tried again is still told
        boolean quotaKnown = !decision.storeFailed();
        // a cost above the capacity: no wait admits it, and a quota shown (all of it left, reset now on a fresh key)
        // sent clients back at once, for ever, with no Retry-After to stop them (a review); the capacity is still told
        // (Envoy's service tells none remaining there instead, as its status does)
        boolean rejectionLeavesNone = statusReset != null;
        boolean fits = !(rejected && decision.never()) || rejectionLeavesNone;
        long resetNanos = !quotaKnown ? 0 // none told: a decision of the failure policy may have no limit to ask
                : rejectionLeavesNone ? statusReset.nanos(reported, rejected) : decision.limitResetAfterNanos();
        long reset = DurationFormat.toSecondsCeil(Math.max(0, resetNanos - heldNanos));
        long retryAfter = Math.max(0, DurationFormat.toSecondsCeil(decision.retryAfterNanos()));
        long remaining = rejected && rejectionLeavesNone ? 0 : decision.remaining();
        if (quotaKnown && sets.contains(ServerConfig.HeaderSet.IETF)) {
            headers.put("RateLimit-Policy", policyItems(checked));
            if (fits) {
                // t is when more quota comes (draft 10, 4.1.2), and a Retry-After no sooner than it (section 6): on a
                // rejection no later than the wait that admits it, where the limit's whole reset said 60 s of a gcra
                // 10/1m whose Retry-After was 6 (a review)
                // (a cost that never fits has no wait: its reset, where Envoy's service tells it, not 0: the review)
                long t = rejected && !decision.never() ? Math.min(reset, retryAfter) : reset;
                headers.put("RateLimit", name(new StringBuilder(), reported.policy()).append(";r=")
                        .append(remaining).append(";t=").append(t).toString());
            }
        }
        if (quotaKnown && sets.contains(ServerConfig.HeaderSet.LEGACY)) {
            headers.put("X-RateLimit-Limit", Long.toString(decision.limit().amount()));
            if (fits) {
                headers.put("X-RateLimit-Remaining", Long.toString(remaining));
                headers.put("X-RateLimit-Reset", Long.toString(reset));
            }
        }
        if (rejected && !decision.never()) {
            headers.put("Retry-After", Long.toString(retryAfter));
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
                name(items, one.policy()).append(";q=").append(limit.amount());
                if (one.policy().inFlight() != null) {
                    // places in flight, not requests in a window: the draft's own unit for them, and no window (a
                    // review found q=10;w=30 telling clients ten requests every thirty seconds)
                    items.append(";qu=\"concurrent-requests\"");
                } else if (limit.periodNanos() % SECOND == 0) {
                    items.append(";w=").append(limit.periodNanos() / SECOND);
                } else if (limit.periodNanos() % MILLISECOND == 0) {
                    // the draft's w is whole seconds, and 5/500ms rounded up to w=1 told half the rate (a review):
                    // no w, and the window in a parameter of Sluice's own, as the draft asks of a vendor's
                    items.append(";sluice-w-ms=").append(limit.periodNanos() / MILLISECOND);
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

    private static final long SECOND = 1_000_000_000L;
    private static final long MILLISECOND = 1_000_000L;

    /**
     * Appends the name of a policy's items as a structured-field string: the policy's, for each of its limits, as
     * spec/server.md writes them ({@code "api-per-key";q=600;w=60, ...} for {@code [600/1m, 3600/1h]}, and
     * {@code RateLimit: "api-per-key";r=599;t=1}). Each limit named by its period too ({@code "api-per-key/1m"}), tried
     * so that {@code r} and {@code t} could be tied to one limit, departed from that contract, and broke a client that
     * matches items by the policy's name. {@code RateLimit} reports the limit closest to rejecting; with the legacy
     * set, {@code X-RateLimit-Limit} says its quota.
     */
    private static StringBuilder name(StringBuilder to, PolicyConfig policy) {
        return to.append('"').append(policy.name()).append('"');
    }
}
