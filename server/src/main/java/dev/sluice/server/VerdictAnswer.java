package dev.sluice.server;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.server.config.ServerConfig;

import java.util.Map;
import java.util.Set;

/**
 * How a {@link Verdict} is answered over HTTP: the status, the JSON body of docs/server.md and the rate limit
 * headers. {@code /v1/check}, {@code /v1/check-request} and the gateway all answer through here.
 */
public record VerdictAnswer(Verdict verdict, Set<ServerConfig.HeaderSet> headerSets) {
    static final ObjectMapper JSON = new ObjectMapper();

    /** The status of {@code /v1/check} and {@code /v1/check-request}: 200, or 429 when rejected. */
    public int status() {
        return verdict.allowed() ? 200 : 429;
    }

    /**
     * The status of a request the gateway or the servlet filter refuses: the rejecting policy's {@code reject_status}
     * (429 unless it says otherwise; nginx's {@code limit_req_status}).
     */
    public int rejectionStatus() {
        return verdict.reported().policy().rejectStatus();
    }

    public Map<String, String> headers() {
        return RateLimitHeaders.of(verdict.checked(), verdict.reported(), !verdict.allowed(), headerSets, 0);
    }

    /**
     * The headers handed to Envoy beside the statuses of its rate limit service: over the limit, nothing remains, as
     * those statuses say, and the resets they tell.
     */
    public Map<String, String> envoyHeaders(RateLimitHeaders.StatusReset statusReset) {
        return RateLimitHeaders.of(verdict.checked(), verdict.reported(), !verdict.allowed(), headerSets, 0,
                statusReset);
    }

    /**
     * The headers of an admitted request answered now, {@code decidedAtNanos} ({@link System#nanoTime()}) having been
     * read as its decision came: the gateway writes them with the upstream's answer, after its hold and the upstream's
     * time, and its resets count from then (a review found them late by the upstream's time).
     */
    public Map<String, String> headersSince(long decidedAtNanos) {
        return RateLimitHeaders.of(verdict.checked(), verdict.reported(), !verdict.allowed(), headerSets,
                verdict.allowed() ? Math.max(0, System.nanoTime() - decidedAtNanos) : 0);
    }

    /**
     * The headers of a request held for its delay before it goes on (the servlet filter): its answer
     * leaves at least that much later, so the resets count from then. A review found a request held 5 s answered
     * with a reset ({@code t=3}) already 2 s past.
     */
    public Map<String, String> headersAfterHold() {
        return RateLimitHeaders.of(verdict.checked(), verdict.reported(), !verdict.allowed(), headerSets,
                verdict.allowed() ? verdict.delayNanos() : 0);
    }

    /**
     * The body of {@code /v1/check}: the reported decision, its {@code delay_ms} the request's, the longest any
     * policy asked for (what the gateway holds it; a review found the reported policy's own, shorter, answered).
     */
    public ObjectNode checkBody() {
        ObjectNode body = JSON.createObjectNode().put("allowed", verdict.allowed());
        Checked reported = verdict.reported();
        if (reported == null) {
            return body.putNull("policy");
        }
        fields(body, reported);
        // a rejection holds nothing: the delays of the policies admitted before it are not the request's (a review)
        return verdict.allowed() ? body.put("delay_ms", DurationFormat.toMillisCeil(verdict.delayNanos())) : body;
    }

    /** The body of {@code /v1/check-request}: the reported decision, then every policy's, in the order decided. */
    public ObjectNode checkRequestBody() {
        ObjectNode body = checkBody();
        var list = body.putArray("checked");
        for (Checked one : verdict.checked()) {
            ObjectNode entry = fields(list.addObject().put("allowed", !one.rejects()), one);
            if (!verdict.allowed() && one.policy().inFlight() != null && one.decision().allowed() && one.cost() > 0) {
                // a refused request holds no place: the one this policy gave it is back already, so what remains is
                // as before it (a review found the place reported taken, with no permit to give it back by)
                entry.put("given_back", true).put("remaining", Math.min(one.decision().limit().amount(),
                        one.decision().remaining() + one.cost()));
            }
        }
        return body;
    }

    /** The body of a request the gateway or the servlet filter refuses: the policy's {@code reject_body}, or Sluice's. */
    public String rejectionText() {
        String own = verdict.reported().policy().rejection().body();
        return own != null ? own : rejectionBody().toString();
    }

    /** Sluice's body of a request the gateway refuses. */
    public ObjectNode rejectionBody() {
        Checked reported = verdict.reported();
        return JSON.createObjectNode().put("error", "rate limited").put("policy", reported.policy().name())
                .put("retry_after_ms", DurationFormat.toMillisCeil(reported.decision().retryAfterNanos()));
    }

    private static ObjectNode fields(ObjectNode node, Checked checked) {
        Decision decision = checked.decision();
        node.put("policy", checked.policy().name())
                .put("limit", decision.limit().amount())
                .put("remaining", decision.remaining())
                .put("retry_after_ms", DurationFormat.toMillisCeil(decision.retryAfterNanos()))
                .put("reset_after_ms", DurationFormat.toMillisCeil(decision.resetAfterNanos()))
                .put("delay_ms", DurationFormat.toMillisCeil(decision.delayNanos()));
        if (checked.outcome() == Checked.Outcome.SHADOW_REJECTED) {
            node.put("shadow_rejected", true);
        }
        if (decision.storeFailed()) {
            node.put("store_failed", true); // on_store_failure decided: the counts are not the key's
        }
        return node;
    }
}
