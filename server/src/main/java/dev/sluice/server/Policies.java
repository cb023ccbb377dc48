package dev.sluice.server;

import dev.sluice.Algorithm;
import dev.sluice.ConcurrencyLimiter;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Permit;
import dev.sluice.RateLimiter;
import dev.sluice.Mode;
import dev.sluice.algorithm.Rule;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.config.Sha256;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.TrustedProxies;
import dev.sluice.store.Store;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Pattern;
import java.util.zip.CRC32;

/**
 * One configuration in force: its policies, each a limiter on the server's store, and the two ways of asking
 * them: one policy for one key ({@code /v1/check}), or every policy that matches an HTTP request, in file order
 * ({@code /v1/check-request} and the gateway). Immutable; a reload builds a new one on the same store.
 *
 * <p>A key is stored under its policy's name and a checksum of what its counters mean
 * ({@link PolicyConfig#counterSignature()}, and the key's parts): {@code api-per-key@1bfc70e0:user-42}. Policies
 * never share state; a reload that keeps a policy's algorithm, limits and key keeps its counters; one that changes
 * them starts the policy afresh.
 */
public final class Policies {
    private final ServerConfig config;
    private final Store store;
    private final ServerMetrics metrics;
    private final TrustedProxies proxies;
    private final Map<String, RateLimiter> limiters = new HashMap<>();
    private final Map<String, ConcurrencyLimiter> inFlight;
    private final Map<String, String> prefixes = new HashMap<>();
    /**
     * The limits calls bring (Envoy's limit overrides), by domain and limit, each made once with its policy, limiter
     * and key prefix, at most {@link #MAX_OVERRIDES}: a store keeps what it works out for a rule by the rule.
     */
    private final Map<Overridden, Overriding> overrides = new ConcurrentHashMap<>();
    private static final int MAX_OVERRIDES = 1_024;
    /** What a policy's name cannot hold, made {@code _} in the name of a domain's overrides. */
    private static final Pattern NOT_IN_NAME = Pattern.compile("[^A-Za-z0-9._-]");
    /** The descriptor patterns of each domain, in order, those without a policy ({@code unlimited} in Envoy's files) too. */
    private final Map<String, List<List<Descriptor.Entry>>> patterns = new HashMap<>();

    /** Whether a policy replaces others ({@code replaces}): without one, a request's charges are all it matches. */
    private final boolean replacing;
    /** The HTTP requests the policies reject, told to the operator's log, a line a policy every ten seconds at most. */
    private final RejectionLog rejections = new RejectionLog();
    /**
     * The requests and calls being decided on {@link #store}, by these policies and every other made on it: once the
     * store is replaced, it is closed when none is left ({@link LiveConfig}), not while one still charges it.
     */
    private final LongAdder deciding;

    /**
     * Policies on {@code store}, those with a {@code max_keys} each on its store in {@code own} (by policy name);
     * concurrency policies keep the in-flight counts of {@code previous} (the policies this configuration replaces)
     * where their limit and key are unchanged, since requests in flight under the old configuration are still in
     * flight. {@code deciding} counts the decisions under way on {@code store}: shared by every {@code Policies}
     * made on it.
     */
    Policies(ServerConfig config, Store store, Map<String, ? extends Store> own, ServerMetrics metrics,
             Map<String, ConcurrencyLimiter> previous, LongAdder deciding) {
        this.config = config;
        this.deciding = deciding;
        this.store = store;
        this.metrics = metrics;
        this.proxies = TrustedProxies.of(config.trustedProxies());
        this.replacing = config.policies().stream().anyMatch(policy -> !policy.replaces().isEmpty());
        Map<String, ConcurrencyLimiter> concurrency = new HashMap<>();
        for (PolicyConfig policy : config.policies()) {
            metrics.watchDecisions(policy.name());
            if (policy.inFlight() == null) {
                Store its = policy.maxKeys() > 0 ? own.get(policy.name()) : store;
                if (its == null) {
                    throw new IllegalArgumentException("policy " + policy.name() + " has max_keys " + policy.maxKeys()
                            + " and no store of its own among " + own.keySet());
                }
                limiters.put(policy.name(), RateLimiter.builder().rule(policy.rule()).store(its).build());
            } else {
                String prefix = prefix(policy);
                metrics.watchInFlight(policy.name());
                ConcurrencyLimiter kept = previous.get(prefix);
                concurrency.put(prefix, kept != null ? kept : ConcurrencyLimiter.builder()
                        .limit(policy.inFlight().amount())
                        .leaseTimeout(java.time.Duration.ofNanos(policy.inFlight().periodNanos())).build());
            }
            prefixes.put(policy.name(), prefix(policy));
        }
        // Envoy's files first, in their order (which of two wildcards is followed), then the file's own patterns
        Map<String, Set<List<Descriptor.Entry>>> ordered = new HashMap<>();
        // a domain of the files without descriptors has no patterns, but has limits still: those calls bring (a review
        // found its overrides ignored, as if no file named it)
        for (String domain : config.envoy().domains()) {
            ordered.put(domain, new LinkedHashSet<>());
        }
        for (PolicyConfig.Match pattern : config.envoy().patterns()) {
            ordered.computeIfAbsent(pattern.domain(), domain -> new LinkedHashSet<>()).add(pattern.descriptor());
        }
        for (PolicyConfig policy : config.policies()) {
            if (policy.match().domain() != null) {
                ordered.computeIfAbsent(policy.match().domain(), domain -> new LinkedHashSet<>())
                        .add(policy.match().descriptor());
            }
        }
        ordered.forEach((domain, its) -> patterns.put(domain, List.copyOf(its)));
        this.inFlight = Map.copyOf(concurrency);
    }

    public ServerConfig config() {
        return config;
    }

    public PolicyConfig policy(String name) {
        return config.policy(name);
    }

    public Store store() {
        return store;
    }

    public TrustedProxies trustedProxies() {
        return proxies;
    }

    /** The requests and calls being decided on the store now, by these policies and every other made on it. */
    public long underWay() {
        return deciding.sum();
    }

    /** The in-flight counters of the concurrency policies, by stored prefix, for the next configuration. */
    public Map<String, ConcurrencyLimiter> inFlight() {
        return inFlight;
    }

    /**
     * What {@code policy} decides for {@code key} at {@code cost}, counted in the metrics. A concurrency policy
     * that admits holds the cost in flight until the {@link Checked} is released or its lease expires; at cost
     * 0 it only tells what is free.
     */
    CompletionStage<Checked> check(PolicyConfig policy, String key, long cost) {
        long asked = System.nanoTime();
        if (policy.inFlight() != null) {
            return CompletableFuture.completedFuture(concurrent(policy, key, cost, asked));
        }
        RateLimiter limiter = limiters.get(policy.name());
        String prefix = prefixes.get(policy.name());
        if (limiter == null) { // a limit a call brought (an Envoy limit override), not a policy of the file
            Overriding overriding = overriding(policy.match().domain(), policy.limits().get(0));
            limiter = overriding.limiter();
            prefix = overriding.prefix();
        }
        return limiter.tryAcquireAsync(stored(prefix, key), cost).thenApply(decision -> counted(policy, key, cost, decision,
                asked));
    }

    private Checked counted(PolicyConfig policy, String key, long cost, Decision decision, long asked) {
        return counted(new Checked(policy, key, cost, decision), asked);
    }

    private Checked counted(Checked checked, long asked) {
        metrics.decided(checked, System.nanoTime() - asked);
        return checked;
    }

    private Checked concurrent(PolicyConfig policy, String key, long cost, long asked) {
        ConcurrencyLimiter limiter = inFlight.get(prefixes.get(policy.name()));
        Permit permit = limiter.tryAcquire(stored(prefixes.get(policy.name()), key), cost);
        if (permit.turnedAway()) {
            metrics.inFlightTurnedAway(policy.name());
        }
        if (cost == 0) { // a peek holds no place: no permit to hand out
            return counted(new Checked(policy, key, cost, permit.decision()), asked);
        }
        return counted(new Checked(policy, key, cost, permit.decision(), permit), asked);
    }

    /**
     * Decides {@code request} by every policy that matches it, in file order, stopping at the first that
     * rejects it. Keys and costs are all worked out first, so a malformed request ({@link BadRequest}) is
     * refused before any policy is charged.
     */
    public CompletionStage<Verdict> decide(ClientRequest request) {
        return decided(charges(request), () -> false, request instanceof Descriptor ? null : request);
    }

    /**
     * What {@code request} is charged, policy by policy, in file order: every policy that matches an HTTP request;
     * a descriptor is charged as a call of its own ({@link #charges(List)}). A malformed cost is a
     * {@link BadRequest}.
     */
    private List<Charge> charges(ClientRequest request) {
        return request instanceof Descriptor descriptor ? charges(List.of(descriptor)).get(0) : charges(request, null);
    }

    /**
     * What one call of Envoy's rate limit service is charged, descriptor by descriptor: for each, the policies of
     * the pattern its walk through the patterns of its domain ends on ({@link Descriptor#walk}: a value named beats
     * a wildcard, which beats any value, entry by entry, as in Envoy's own service, so that a limit for one value
     * can stand in for the limit of the rest), or the limit it brings ({@link #overridden}); less the policies
     * that the limit another descriptor of the call ends on {@code replaces} (Envoy's {@code replaces}; only limits
     * given a name can be replaced).
     *
     * @throws BadRequest for a limit a descriptor brings that the store cannot decide (a year, on Redis)
     */
    public List<List<Charge>> charges(List<Descriptor> call) {
        List<List<Charge>> each = new ArrayList<>(call.size());
        Set<String> replaced = new HashSet<>();
        for (int i = 0; i < call.size(); i++) {
            Descriptor descriptor = call.get(i);
            if (descriptor.limit() != null) {
                try {
                    each.add(overridden(descriptor)); // no name: it neither replaces nor is replaced
                } catch (IllegalArgumentException e) { // a limit the store cannot decide (Store.check)
                    throw new BadRequest("descriptors[" + i + "].limit: " + e.getMessage());
                }
                continue;
            }
            List<Descriptor.Entry> pattern = pattern(descriptor);
            each.add(charges(descriptor, pattern));
            if (pattern != null) {
                replaced.addAll(config.envoy().replaces().getOrDefault(
                        new PolicyConfig.Match(null, null, null, descriptor.domain(), pattern), List.of()));
            }
        }
        replaced.retainAll(config.envoy().replaceable());
        if (!replaced.isEmpty()) {
            each.replaceAll(its -> its.stream().filter(charge -> !replaced.contains(charge.policy().name())).toList());
        }
        return each;
    }

    /** {@code request}'s charges; for a descriptor, those of the policies of {@code decides}, its walk's end. */
    private List<Charge> charges(ClientRequest request, List<Descriptor.Entry> decides) {
        List<Charge> charges = new ArrayList<>();
        for (PolicyConfig policy : config.policies()) {
            PolicyConfig.Match match = policy.match();
            if (!match.matchesApartFromHeaders(request)
                    || request instanceof Descriptor && !match.descriptor().equals(decides)) {
                continue;
            }
            if (match.headers() != null) {
                for (String header : match.headers().keySet()) {
                    // which of two values would the upstream read? As for a key's header: refused, not guessed (a
                    // client that sent X-Plan: pro before the X-Plan: free its proxy added would pick its own tier)
                    if (request.headerCount(header) > 1) {
                        throw new BadRequest("header " + header + " (matched by policy " + policy.name() + "): given "
                                + request.headerCount(header) + " times; it is given once");
                    }
                }
                if (!match.matchesHeaders(request)) {
                    continue;
                }
            }
            String key = KeyPart.keyOf(policy.key(), request, policy.skipIfMissing(), policy.name());
            if (key != null) {
                charges.add(new Charge(policy, key, cost(policy, request)));
            }
        }
        // a policy that charges the request takes the place of those it replaces (one that passed the request over,
        // its key part missing, takes none: so a key with a fallback is two policies, the first replacing the second);
        // a shadow policy takes none: trying a tier out leaves the limit it would replace in force (a review found
        // the tier unlimited while tried)
        if (!replacing) {
            return charges; // nothing to look at, nothing made, on the path of every request
        }
        Set<String> replaced = new HashSet<>();
        for (Charge charge : charges) {
            if (!charge.policy().shadow()) {
                replaced.addAll(charge.policy().replaces());
            }
        }
        if (!replaced.isEmpty()) {
            charges.removeIf(charge -> replaced.contains(charge.policy().name()));
        }
        return charges;
    }

    /**
     * The pattern whose policies decide {@code descriptor}: where its walk through the patterns of its domain ends
     * ({@link Descriptor#walk}; the patterns of Envoy's files first, in their order, then those of {@code policies}),
     * or null.
     */
    private List<Descriptor.Entry> pattern(Descriptor descriptor) {
        return descriptor.walk(patterns.getOrDefault(descriptor.domain(), List.of()));
    }

    /**
     * The charge of a descriptor that brings its own limit (Envoy's limit override): that limit decides it, in
     * fixed windows aligned to the epoch, whatever policies its walk would end on, as in Envoy's own service. It is
     * counted per descriptor (its domain and every entry, {@link Descriptor#text}) and per limit (a different override
     * starts afresh, as a policy whose limits change does), never in shadow mode, and reported under the name
     * {@code <domain>/override}, which no policy of a file can take. A domain no policy names has no limits at
     * all, as in Envoy's service, and its overrides charge nothing.
     */
    private List<Charge> overridden(Descriptor descriptor) {
        if (!names(descriptor.domain())) {
            return List.of();
        }
        PolicyConfig policy = overriding(descriptor.domain(), descriptor.limit()).policy();
        return List.of(new Charge(policy, descriptor.text(), descriptor.hits()));
    }

    /**
     * The limit of 0 requests of Envoy's files ({@code requests_per_unit: 0}) that {@code descriptor}'s walk ends on,
     * or null.
     */
    public ServerConfig.Envoy.Blocked blocked(Descriptor descriptor) {
        List<Descriptor.Entry> pattern = pattern(descriptor);
        return pattern == null ? null : config.envoy().blocked().get(
                new PolicyConfig.Match(null, null, null, descriptor.domain(), pattern));
    }

    /** Whether {@code descriptor}'s walk ends on an {@code unlimited: true} node of Envoy's files. */
    public boolean unlimited(Descriptor descriptor) {
        if (descriptor.limit() != null) {
            return false;
        }
        List<Descriptor.Entry> pattern = pattern(descriptor);
        return pattern != null && config.envoy().unlimited().contains(
                new PolicyConfig.Match(null, null, null, descriptor.domain(), pattern));
    }

    /** The name the limits calls bring for descriptors of {@code domain} are reported and counted under. */
    public static String overrideName(String domain) {
        return NOT_IN_NAME.matcher(domain).replaceAll("_") + "/override";
    }

    /** Whether a policy, or a limit of Envoy's files, names {@code domain}: else it has no limits at all. */
    public boolean names(String domain) {
        return patterns.containsKey(domain);
    }

    /** A limit a call brings for a descriptor of a domain. */
    private record Overridden(String domain, Limit limit) {
    }

    /** What a limit a call brings is decided and reported by: a policy of its own, its limiter, its keys' prefix. */
    private record Overriding(PolicyConfig policy, RateLimiter limiter, String prefix) {
    }

    private Overriding overriding(String domain, Limit limit) {
        Overridden overridden = new Overridden(domain, limit);
        Overriding kept = overrides.get(overridden);
        if (kept != null) {
            return kept;
        }
        if (overrides.size() >= MAX_OVERRIDES) {
            // a limiter is only a rule on the store: making it again loses no count (cleared here, outside
            // computeIfAbsent, whose function must not change the map)
            overrides.clear();
        }
        return overrides.computeIfAbsent(overridden, given -> {
            Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(given.limit()), Mode.REJECT, 0);
            RateLimiter limiter = RateLimiter.builder().rule(rule).store(store).build();
            // a descriptor's entries are its key (Descriptor#text), so the policy matches the domain only
            PolicyConfig policy = new PolicyConfig(overrideName(given.domain()), new PolicyConfig.Match(null, null, null,
                    given.domain(), List.of()), List.of(), rule, null, 1, null, false, false);
            return new Overriding(policy, limiter, prefix(policy));
        });
    }

    /** One policy to charge: under which key, at what cost. */
    public record Charge(PolicyConfig policy, String key, long cost) {
    }

    /** Charges {@code charges} in order, stopping at the first policy that rejects. */
    public CompletionStage<Verdict> decide(List<Charge> charges) {
        return decide(charges, () -> false);
    }

    /**
     * {@link #decide(List)}, stopping too before a charge once {@code abandoned} says the caller has gone (an Envoy
     * call cancelled, its deadline past): its answer would be dropped, and the charges left would count requests
     * that Envoy let through, or refused, without them (a review found them charged, each up to store_timeout on a
     * slow Redis, after Envoy had given up at its 20 ms). What was charged before stays charged.
     */
    public CompletionStage<Verdict> decide(List<Charge> charges, java.util.function.BooleanSupplier abandoned) {
        return decided(charges, abandoned, null);
    }

    /**
     * {@link #decide(List, java.util.function.BooleanSupplier)}, its rejections told to the log when they are those of
     * {@code request}, an HTTP request (null: none to tell), in the one stage every decision has.
     */
    private CompletionStage<Verdict> decided(List<Charge> charges, java.util.function.BooleanSupplier abandoned,
                                             ClientRequest request) {
        deciding.increment();
        CompletionStage<Verdict> decided;
        try {
            decided = next(charges, 0, new ArrayList<>(charges.size()), abandoned);
        } catch (RuntimeException e) {
            deciding.decrement();
            throw e;
        }
        // one stage after the decisions, as before the count: a request's path allocates no more
        return decided.whenComplete((verdict, failure) -> {
            deciding.decrement();
            if (failure != null) {
                return;
            }
            if (!abandoned.getAsBoolean()) { // one whose caller has gone is answered to no one
                metrics.requested(verdict);
            }
            if (request != null) {
                rejections.told(request, verdict);
            }
        });
    }

    /** {@code policy}'s decision for {@code key} at {@code cost}, as the verdict of a request of its own. */
    public CompletionStage<Verdict> decide(PolicyConfig policy, String key, long cost) {
        return decide(List.of(new Charge(policy, key, cost)));
    }

    /**
     * Charges {@code charges} from {@code index} on. A decision already made when asked (the in-memory store's, a
     * rejection remembered) is taken in this loop, not in a continuation nested one level deeper per charge: a
     * call of Envoy's with 1,200 descriptors overflowed the stack so
     * ({@code RateLimitServiceTest.aCallOfManyDescriptorsIsDecidedWhole} pins it).
     */
    private CompletionStage<Verdict> next(List<Charge> charges, int index, List<Checked> done,
                                          java.util.function.BooleanSupplier abandoned) {
        for (; index < charges.size(); index++) {
            if (abandoned.getAsBoolean()) {
                Verdict partial = new Verdict(done);
                partial.release(); // the request goes no further
                return CompletableFuture.completedFuture(partial);
            }
            Charge charge = charges.get(index);
            CompletableFuture<Checked> checking;
            try {
                checking = check(charge.policy(), charge.key(), charge.cost()).toCompletableFuture();
            } catch (RuntimeException e) {
                checking = CompletableFuture.failedFuture(e);
            }
            if (!checking.isDone() || checking.isCompletedExceptionally()) {
                int after = index + 1;
                return checking.whenComplete((checked, failure) -> {
                    if (failure != null) {
                        new Verdict(done).release(); // the request goes no further
                    }
                }).thenCompose(checked -> {
                    Verdict rejected = rejected(done, checked);
                    return rejected != null ? CompletableFuture.completedFuture(rejected)
                            : next(charges, after, done, abandoned);
                });
            }
            Verdict rejected = rejected(done, checking.join());
            if (rejected != null) {
                return CompletableFuture.completedFuture(rejected);
            }
        }
        return CompletableFuture.completedFuture(new Verdict(done));
    }

    /** Adds {@code checked} to {@code done}; when it rejects, the verdict that ends the request, else null. */
    private static Verdict rejected(List<Checked> done, Checked checked) {
        done.add(checked);
        if (!checked.rejects()) {
            return null;
        }
        Verdict rejected = new Verdict(done);
        rejected.release(); // the request goes no further: nothing of it is in flight
        return rejected;
    }

    private static long cost(PolicyConfig policy, ClientRequest request) {
        if (request instanceof Descriptor descriptor) {
            // past what a cost can be, it is more than any limit holds: OVER_LIMIT, as Envoy's own service answers
            // a hits_addend past its limit. An error (as before) let Envoy's default failure_mode_deny: false pass
            // the request, and every other limit of its call, unlimited (a review found that bypass)
            long hits = descriptor.hits();
            return policy.cost() != 0 && hits > Long.MAX_VALUE / policy.cost() ? Long.MAX_VALUE : policy.cost() * hits;
        }
        if (policy.costHeader() == null) {
            return policy.cost();
        }
        String value = request.header(policy.costHeader());
        if (value == null) {
            return policy.cost();
        }
        int given = request.headerCount(policy.costHeader());
        if (given > 1) { // the upstream may read another of them than the first
            throw new BadRequest("header " + policy.costHeader() + " (the cost of policy " + policy.name()
                    + "): given " + given + " times; a cost is given once");
        }
        String digits = value.trim();
        try {
            // ASCII digits only: Long.parseLong also reads "+5" and "٥", which the upstream may read otherwise
            long cost = digits.isEmpty() || !digits.chars().allMatch(c -> c >= '0' && c <= '9') ? -1
                    : Long.parseLong(digits);
            if (cost >= 0) {
                return cost;
            }
        } catch (NumberFormatException e) {
            // falls through to the message
        }
        throw new BadRequest("header " + policy.costHeader() + " (the cost of policy " + policy.name()
                + "): expected a whole number >= 0, got \"" + value + "\"");
    }

    /** The stored key of {@code key} under {@code policy}, without the store's own prefix. */
    public static String storedKey(PolicyConfig policy, String key) {
        return stored(prefix(policy), key);
    }

    /**
     * The longest key kept as it is. A longer one is kept as its SHA-256, written {@code sha256:} and 64 hex digits:
     * the in-memory store bounds how many keys it holds (max_keys), not how long they are, and a review filled a
     * server of 256 MB to its end with keys of a few kilobytes each (a body of /v1/check holds up to 64 KB, a header
     * 8 KB); two keys share a digest no more than two keys share a counter otherwise. Redis is spared the bytes too.
     */
    static final int LONGEST_KEY_KEPT = 256;

    /** {@code prefix} and {@code key}, or {@code key}'s digest when it is longer than {@link #LONGEST_KEY_KEPT}. */
    static String stored(String prefix, String key) {
        if (key.length() <= LONGEST_KEY_KEPT) {
            return prefix + key;
        }
        return prefix + "sha256:" + Sha256.hex(key);
    }

    /**
     * Whether a reload from {@code was} to {@code now} (one name) keeps the policy's counts: its keys are stored under
     * the same prefix, on the same store (its own, of one {@code max_keys}, or the shared one).
     */
    static boolean keepsCounts(PolicyConfig was, PolicyConfig now) {
        return prefix(was).equals(prefix(now)) && was.maxKeys() == now.maxKeys();
    }

    private static String prefix(PolicyConfig policy) {
        CRC32 crc = new CRC32();
        // the key's parts too: a policy whose key changed (header:X-User to header:X-Account), or a name taken by a
        // policy of another key (an Envoy limit's made name by a policy of sluice.yaml), counted values that mean
        // something else under the old counts (a review found it)
        crc.update((policy.counterSignature() + " key " + policy.key()).getBytes(StandardCharsets.UTF_8));
        return policy.name() + "@" + String.format("%08x", crc.getValue()) + ":";
    }
}
