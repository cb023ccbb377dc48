package dev.sluice.server;

import dev.sluice.Decision;
import dev.sluice.Permit;
import dev.sluice.server.config.PolicyConfig;

/**
 * One policy's decision on one request; for a concurrency policy, with the {@link Permit} that holds the
 * request's place until it is {@linkplain #release() released} or its lease expires.
 */
public record Checked(PolicyConfig policy, String key, long cost, Decision decision, Permit permit) {
    public Checked(PolicyConfig policy, String key, long cost, Decision decision) {
        this(policy, key, cost, decision, null);
    }

    /** Gives back the in-flight capacity this decision took, if any (once; later calls do nothing). */
    public void release() {
        if (permit != null) {
            permit.close();
        }
    }

    /** How a decision is counted ({@code sluice_decisions_total{outcome=...}}). */
    public enum Outcome {
        ALLOWED("allowed"), DELAYED("delayed"), REJECTED("rejected"), SHADOW_REJECTED("shadow_rejected"),
        /** A cost of 0: what is left was asked, nothing taken (found by trying it: peeks were counted as allowed). */
        PEEKED("peeked");

        private final String label;

        Outcome(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    /** The request is refused by this policy (a shadow policy never refuses). */
    public boolean rejects() {
        return !decision.allowed() && !policy.shadow();
    }

    public Outcome outcome() {
        if (cost == 0) {
            return Outcome.PEEKED;
        }
        if (!decision.allowed()) {
            return policy.shadow() ? Outcome.SHADOW_REJECTED : Outcome.REJECTED;
        }
        return decision.delayNanos() > 0 ? Outcome.DELAYED : Outcome.ALLOWED;
    }
}
