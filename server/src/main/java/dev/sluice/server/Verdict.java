package dev.sluice.server;

import java.util.List;

/**
 * What the matching policies decided on one request, in file order. Checking stops at the first policy that
 * rejects, so a rejection is always the last entry, and the policies after it were not charged.
 */
public record Verdict(List<Checked> checked) {
    public boolean allowed() {
        return checked.isEmpty() || !checked.get(checked.size() - 1).rejects();
    }

    /** Gives back the in-flight capacity of every concurrency policy that admitted the request: it is over. */
    public void release() {
        checked.forEach(Checked::release);
    }

    /** How long an admitted request waits before it goes on: the longest delay any policy asked for. */
    public long delayNanos() {
        long delay = 0;
        for (Checked one : checked) {
            if (one.decision().allowed()) {
                delay = Math.max(delay, one.decision().delayNanos());
            }
        }
        return delay;
    }

    /**
     * The decision the answer reports: the rejecting policy's, else the one closest to rejecting (fewest
     * remaining, the first of equals) among the enforced policies, a shadow policy only when nothing else
     * decided (a shadow policy is meant to stay out of the client's sight); null when no policy matched.
     */
    public Checked reported() {
        if (checked.isEmpty()) {
            return null;
        }
        if (!allowed()) {
            return checked.get(checked.size() - 1);
        }
        Checked closest = null;
        for (Checked one : checked) {
            if (closest == null || closest.policy().shadow() && !one.policy().shadow()
                    || one.policy().shadow() == closest.policy().shadow()
                    && one.decision().remaining() < closest.decision().remaining()) {
                closest = one;
            }
        }
        return closest;
    }
}
