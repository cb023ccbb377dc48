package dev.sluice.server.http;

import dev.sluice.server.QuietLog;

/**
 * Why the gateway answered 502, told to the operator's log and not to the client: the reason names the upstream's
 * address and the network's internals ({@code finishConnect(..) failed: Connection refused: /10.0.3.7:3300}), which a
 * review found in the body every client got; nginx, too, answers a bare 502 and logs why. An upstream that is down
 * fails every request the same way, so a reason is logged again only after {@link QuietLog#QUIET}, with how many 502s
 * of that reason were not logged meanwhile; another reason is logged at once.
 */
final class UpstreamFailures {
    private final QuietLog log = new QuietLog(System.getLogger("sluice"), System.Logger.Level.WARNING);

    /** Logs {@code cause} as the reason of a 502, unless the same reason was logged within the last ten seconds. */
    void failed(Throwable cause) {
        String reason = cause == null ? "no reason given" : cause.getMessage() != null ? cause.getMessage()
                : cause.getClass().getName();
        log.say(reason, () -> "gateway: the upstream failed, answered 502: " + reason, "502s of this reason");
    }
}
