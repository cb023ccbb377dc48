package dev.sluice.server.config;

import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.PathGlob;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * One policy of {@code sluice.yaml}: which requests, which key, which limits, and what to do with a request
 * that does not fit.
 *
 * @param name          unique within the file
 * @param key           the parts of the key
 * @param rule          the algorithm, the limits and the mode the limiter enforces ({@code shadow} decides as
 *                      {@code reject}); null for a concurrency policy
 * @param inFlight      a concurrency policy's limit: at most {@code amount} in flight per key, a lease held at
 *                      most {@code period}; null for a rate policy
 * @param cost          a fixed cost, unless {@code costHeader} names the request header that carries it
 * @param shadow        decide and count, but never reject
 * @param skipIfMissing a request that lacks a part of the key is not checked by this policy at all
 * @param rejection     how a request this policy rejects is answered by the gateway and the servlet filter (the
 *                      API's {@code /v1/check} answers 429 and its own body whatever it is: they are the decision)
 * @param replaces      the HTTP policies this one takes the place of: a request this policy charges (it matches, and
 *                      has its key) is not charged by them, as a route's own limit stands in for a general one (Kong's
 *                      plugin on a route, Envoy's {@code replaces})
 * @param maxKeys       the most keys of a store of this policy's own ({@code max_keys}, in memory: nginx's zone), so
 *                      that a flood of new keys of another policy cannot evict this one's (a login limit reset by a
 *                      flood of search keys); 0: the keys live in the store every other policy shares
 */
public record PolicyConfig(String name, Match match, List<KeyPart> key, Rule rule, Limit inFlight, long cost,
                           String costHeader, boolean shadow, boolean skipIfMissing, Rejection rejection,
                           List<String> replaces, long maxKeys) {
    /** {@code 429 Too Many Requests}, unless {@code reject_status} says otherwise. */
    public static final int DEFAULT_REJECT_STATUS = 429;

    /**
     * How a rejected request is answered: its status ({@code reject_status}, nginx's {@code limit_req_status}) and its
     * body, a JSON object ({@code reject_body}, Kong's {@code error_message}), or null for Sluice's own, which names the
     * policy and the wait.
     */
    public record Rejection(int status, String body) {
        public static final Rejection DEFAULT = new Rejection(DEFAULT_REJECT_STATUS, null);
    }

    /** A policy that rejects as {@link Rejection#DEFAULT} and replaces none. */
    public PolicyConfig(String name, Match match, List<KeyPart> key, Rule rule, Limit inFlight, long cost,
                        String costHeader, boolean shadow, boolean skipIfMissing) {
        this(name, match, key, rule, inFlight, cost, costHeader, shadow, skipIfMissing, Rejection.DEFAULT, List.of(), 0);
    }

    /** The status of a request this policy rejects. */
    public int rejectStatus() {
        return rejection.status();
    }

    /** This policy, answering the requests it rejects as {@code answered}. */
    public PolicyConfig withRejection(Rejection answered) {
        return new PolicyConfig(name, match, key, rule, inFlight, cost, costHeader, shadow, skipIfMissing, answered,
                replaces, maxKeys);
    }

    /** This policy under the name {@code other}. */
    public PolicyConfig named(String other) {
        return new PolicyConfig(other, match, key, rule, inFlight, cost, costHeader, shadow, skipIfMissing, rejection,
                replaces, maxKeys);
    }

    /** This policy, taking the place of the policies named {@code others}. */
    public PolicyConfig withReplaces(List<String> others) {
        return new PolicyConfig(name, match, key, rule, inFlight, cost, costHeader, shadow, skipIfMissing, rejection,
                List.copyOf(others), maxKeys);
    }

    /** This policy, its keys held by a store of its own of {@code most} keys ({@code max_keys}), or 0: the shared one. */
    public PolicyConfig withMaxKeys(long most) {
        return new PolicyConfig(name, match, key, rule, inFlight, cost, costHeader, shadow, skipIfMissing, rejection,
                replaces, most);
    }

    /**
     * Which requests a policy applies to; {@code null} fields match everything. A policy that names a
     * {@code domain} (with its {@code descriptor} pattern) decides the descriptors Envoy sends to the rate limit
     * service, and never an HTTP request; one that does not decides HTTP requests, and never a descriptor.
     */
    public record Match(PathGlob path, List<String> methods, String host, String domain,
                        List<Descriptor.Entry> descriptor, Map<String, String> headers) {
        public static final Match ALL = new Match(null, null, null, null, null);

        /** An HTTP request's match. */
        public Match(PathGlob path, List<String> methods, String host) {
            this(path, methods, host, null, null, null);
        }

        /**
         * An HTTP request's match on its headers too: each named header's first value is the one given ({@code
         * headers}: names in lower case), as Envoy's route matchers and Kong's consumer groups tell tiers of clients
         * apart.
         */
        public Match(PathGlob path, List<String> methods, String host, Map<String, String> headers) {
            this(path, methods, host, null, null, headers);
        }

        /** A descriptor's match (or, with nulls, every HTTP request's). */
        public Match(PathGlob path, List<String> methods, String host, String domain, List<Descriptor.Entry> descriptor) {
            this(path, methods, host, domain, descriptor, null);
        }

        public boolean matches(ClientRequest request) {
            return matchesApartFromHeaders(request) && matchesHeaders(request);
        }

        /** Whether {@code request}'s {@link #headers} are those this match names (any, when it names none). */
        public boolean matchesHeaders(ClientRequest request) {
            return headers == null || headers.entrySet().stream()
                    .allMatch(header -> header.getValue().equals(request.header(header.getKey())));
        }

        /** Whether {@code request} matches all but {@link #headers}: the headers a match reads are those of such. */
        public boolean matchesApartFromHeaders(ClientRequest request) {
            if (request instanceof Descriptor asked) {
                return domain != null && domain.equals(asked.domain()) && asked.fits(descriptor);
            }
            return domain == null
                    // a policy that lists HEAD matches it as such; one for GET matches it too (countedMethod)
                    && (methods == null || methods.contains(request.method())
                        || methods.contains(request.countedMethod()))
                    && (host == null || host.equalsIgnoreCase(request.host()))
                    && (path == null || path.matches(request.path()));
        }
    }

    /**
     * What a policy's counters mean: its algorithm and limits (and, in the stored key's checksum, its key parts:
     * {@code Policies}). Keys are stored under the policy's name and this text, so a reload that keeps it keeps the
     * counters, and one that changes it starts afresh instead of reading one algorithm's state with another (the old
     * counters expire by themselves).
     */
    public String counterSignature() {
        return algorithm() + " " + limits().stream().map(Limit::toString).collect(Collectors.joining(", "));
    }

    /** The algorithm's name as the file spells it ({@code concurrency} included). */
    public String algorithm() {
        return rule == null ? "concurrency" : rule.algorithm().label();
    }

    public List<Limit> limits() {
        return rule == null ? List.of(inFlight) : rule.limits();
    }

    /** {@code reject}, {@code delay}, {@code shaping} or {@code shadow}. */
    public String mode() {
        return shadow ? "shadow" : rule == null ? "reject" : rule.mode().label();
    }
}
