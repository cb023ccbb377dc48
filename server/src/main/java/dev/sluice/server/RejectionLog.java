package dev.sluice.server;

import dev.sluice.server.config.TerminalText;
import dev.sluice.DurationFormat;
import dev.sluice.server.request.ClientRequest;

/**
 * The requests a policy rejected, or would have (a shadow policy), told to the operator's log (the logger
 * {@code sluice.rejections}, at INFO): which policy, the request and its client, and when it may come back, as nginx's
 * {@code limiting requests} lines tell them. A client hammering a limit is rejected thousands of times a second, so
 * each policy has a line at most every ten seconds, with the count of those it left out ({@link QuietLog}); the key
 * itself is never written (an API key, a user's name), only the client's address and the request.
 */
final class RejectionLog {
    private final QuietLog log = new QuietLog(System.getLogger("sluice.rejections"), System.Logger.Level.INFO);

    /** Tells the rejections of {@code verdict}, the decision of {@code request}, an HTTP request's. */
    void told(ClientRequest request, Verdict verdict) {
        for (Checked one : verdict.checked()) {
            Checked.Outcome outcome = one.outcome();
            if (outcome == Checked.Outcome.REJECTED || outcome == Checked.Outcome.SHADOW_REJECTED) {
                String policy = one.policy().name();
                log.say(policy, () -> "policy " + policy + (outcome == Checked.Outcome.REJECTED ? " rejected "
                        : " (shadow) would have rejected ") + TerminalText.of(request.method()) + " "
                        + TerminalText.of(request.path()) + (request.ip() == null ? "" : " from " + TerminalText.of(request.ip()))
                        + (one.decision().never() ? " (its cost can never fit)"
                        : " (retry after " + DurationFormat.toMillisCeil(one.decision().retryAfterNanos()) + " ms)"),
                        "rejections by this policy");
            }
        }
    }
}
