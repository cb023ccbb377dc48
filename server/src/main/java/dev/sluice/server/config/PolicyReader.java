package dev.sluice.server.config;

import dev.sluice.Algorithm;
import dev.sluice.ConcurrencyLimiter;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.HeaderText;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.PathGlob;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The policies of {@code sluice.yaml}: each checked field by field (its match, key, algorithm and limits, cost, mode),
 * what its store can decide (Redis, Envoy's descriptors), and what the policies say of one another ({@code replaces}:
 * names that exist, no cycle). Every refusal names the file, the line and the field, through {@link YamlNodes}.
 */
final class PolicyReader {
    private static final Set<String> POLICY = Set.of("name", "match", "key", "algorithm", "limits", "burst", "refill",
            "cost", "mode", "max_delay", "skip_if_missing", "reject_status", "reject_body", "replaces", "max_keys");
    private static final Set<String> MATCH = Set.of("path", "methods", "host", "headers", "domain", "descriptor");
    /** A header's name, as HTTP writes one (a token). */
    private static final Pattern HEADER_NAME = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]*");
    private static final Pattern METHOD = Pattern.compile("[A-Z]+");

    private final YamlNodes yaml;

    PolicyReader(YamlNodes yaml) {
        this.yaml = yaml;
    }

    /**
     * {@code match.headers}: each header's name and the value its first value must be, names compared in any case,
     * values exactly.
     */
    private Map<String, String> headers(Node node, String field) throws ConfigException {
        if (!(node instanceof MappingNode mapping) || mapping.getValue().isEmpty()) {
            throw yaml.error(node, field, "expected a mapping of header names to values, such as {X-Plan: premium}");
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (NodeTuple tuple : mapping.getValue()) {
            String name = yaml.scalar(tuple.getKeyNode(), field);
            if (!HEADER_NAME.matcher(name).matches()) {
                throw yaml.error(tuple.getKeyNode(), field, "\"" + name + "\" is no header name");
            }
            String value = yaml.scalar(tuple.getValueNode(), field + "." + name);
            if (!value.equals(value.strip())) {
                throw yaml.error(tuple.getValueNode(), field + "." + name, "\"" + value + "\" never matches: a header's value"
                        + " is read without the spaces around it");
            }
            if (headers.put(name.toLowerCase(Locale.ROOT), value) != null) {
                throw yaml.error(tuple.getKeyNode(), field + "." + name, "given twice (header names are one in any case)");
            }
        }
        return java.util.Collections.unmodifiableMap(headers);
    }

    /**
     * {@code replaces} of each policy: the HTTP policies of the file it takes the place of, each named once; a
     * policy of Envoy's descriptors has Envoy's own {@code replaces} instead.
     */
    List<PolicyConfig> withReplaces(List<Node> items, List<PolicyConfig> policies) throws ConfigException {
        Map<String, PolicyConfig> byName = byName(policies);
        List<PolicyConfig> replacing = new ArrayList<>(policies);
        for (int i = 0; i < items.size(); i++) {
            Node node = YamlNodes.valueOf(items.get(i), "replaces");
            if (node == items.get(i)) {
                continue;
            }
            String field = "policies[" + i + "].replaces";
            PolicyConfig policy = policies.get(i);
            if (policy.match().domain() != null) {
                throw yaml.error(node, field, "is for HTTP requests; a policy of Envoy's descriptors is replaced as in"
                        + " Envoy's files (a limit's replaces)");
            }
            List<Node> names = yaml.list(node, field);
            if (names.isEmpty()) {
                throw yaml.error(node, field, "an empty list replaces nothing; name the policies, or leave replaces out");
            }
            List<String> replaced = new ArrayList<>();
            for (int j = 0; j < names.size(); j++) {
                String name = yaml.scalar(names.get(j), field + "[" + j + "]");
                PolicyConfig other = byName.get(name);
                String why = other == null ? "no policy of this file is named \"" + name + "\""
                        : other == policy ? "a policy cannot replace itself"
                        : other.match().domain() != null ? "\"" + name + "\" decides Envoy's descriptors, not HTTP requests"
                        : replaced.contains(name) ? "\"" + name + "\" is named twice" : null;
                if (why != null) {
                    throw yaml.error(names.get(j), field + "[" + j + "]", why);
                }
                replaced.add(name);
            }
            replacing.set(i, policy.withReplaces(replaced));
        }
        // no cycle: a request that every policy of one would charge would be charged by none (a review found it)
        Map<String, PolicyConfig> replacingByName = byName(replacing);
        for (int item = 0; item < replacing.size(); item++) {
            List<String> cycle = cycleFrom(replacing.get(item).name(), replacingByName, new ArrayList<>());
            if (cycle != null) { // told at this policy's entry that begins it
                int entry = replacing.get(item).replaces().indexOf(cycle.get(1));
                throw yaml.error(yaml.list(YamlNodes.valueOf(items.get(item), "replaces"), "").get(entry), "policies[" + item
                        + "].replaces[" + entry + "]", "the policies replace one another in a cycle ("
                        + String.join(" replaces ", cycle) + "): a request all of them charge would be charged by"
                        + " none");
            }
        }
        return replacing;
    }

    private static Map<String, PolicyConfig> byName(List<PolicyConfig> policies) {
        Map<String, PolicyConfig> byName = new HashMap<>();
        policies.forEach(policy -> byName.put(policy.name(), policy));
        return byName;
    }

    /** The names of a cycle of {@code replaces} that goes back to {@code from}, from it, or null. */
    private static List<String> cycleFrom(String from, Map<String, PolicyConfig> byName, List<String> path) {
        path.add(from);
        for (String next : byName.get(from).replaces()) {
            if (next.equals(path.get(0))) {
                List<String> cycle = new ArrayList<>(path);
                cycle.add(next);
                return cycle;
            }
            if (!path.contains(next)) {
                List<String> found = cycleFrom(next, byName, path);
                if (found != null) {
                    return found;
                }
            }
        }
        path.remove(path.size() - 1);
        return null;
    }

    PolicyConfig policy(Node node, String field, boolean onRedis) throws ConfigException {
        Map<String, Node> fields = yaml.fields(node, field + ".", POLICY);
        String name = yaml.scalar(yaml.required(fields, node, field, "name"), field + ".name");
        if (!NAME.matcher(name).matches()) {
            throw yaml.error(fields.get("name"), field + ".name",
                    "expected letters, digits, '.', '_' or '-', got \"" + name + "\"");
        }
        PolicyConfig.Match match = fields.containsKey("match")
                ? match(fields.get("match"), field + ".match") : PolicyConfig.Match.ALL;
        List<KeyPart> key = new ArrayList<>();
        List<Node> parts = yaml.list(yaml.required(fields, node, field, "key"), field + ".key");
        if (parts.isEmpty()) {
            throw yaml.error(fields.get("key"), field + ".key", "at least one key part is needed");
        }
        for (int i = 0; i < parts.size(); i++) {
            String where = field + ".key[" + i + "]";
            String text = yaml.scalar(parts.get(i), where);
            KeyPart part = yaml.parsed(parts.get(i), where, () -> KeyPart.parse(text));
            for (int j = 0; j < key.size(); j++) {
                // a slip, most likely for another part (header names are one in any case): refused as a limit given
                // twice is (a review found [ip, ip] taken silently)
                if (key.get(j).toString().equalsIgnoreCase(part.toString()) && (part instanceof KeyPart.Header
                        || key.get(j).equals(part))) {
                    throw yaml.error(parts.get(i), where, "key part \"" + text + "\" is given twice (also at " + field
                            + ".key[" + j + "]): the same part twice keys as once");
                }
            }
            key.add(part);
        }
        keyReadable(parts, key, match, field);
        Node algorithmNode = yaml.required(fields, node, field, "algorithm");
        String algorithmName = yaml.scalar(algorithmNode, field + ".algorithm");
        if (match.domain() != null) {
            envoyDecidable(fields, algorithmNode, algorithmName, field);
        }
        if (algorithmName.equals("concurrency")) {
            return concurrencyPolicy(node, fields, field, name, match, List.copyOf(key));
        }
        Algorithm algorithm = yaml.parsed(algorithmNode, field + ".algorithm", () -> {
            try {
                return Algorithm.parse(algorithmName);
            } catch (IllegalArgumentException e) { // a policy takes one more than the core's algorithms
                throw new IllegalArgumentException(e.getMessage() + ", concurrency");
            }
        });
        // what only some algorithms take is refused at its own line (Rule.of would name the policy only)
        if (fields.containsKey("burst") && !algorithm.hasBurst()) {
            throw yaml.error(fields.get("burst"), field + ".burst", algorithm.refusesBurst());
        }
        if (fields.containsKey("refill") && !algorithm.hasRefill()) {
            throw yaml.error(fields.get("refill"), field + ".refill", algorithm.refusesRefill());
        }
        Long burst = fields.containsKey("burst") ? yaml.whole(fields.get("burst"), field + ".burst", 1) : null;
        Refill refill = null;
        if (fields.containsKey("refill")) {
            String text = yaml.scalar(fields.get("refill"), field + ".refill");
            refill = yaml.parsed(fields.get("refill"), field + ".refill", () -> Refill.parse(text));
        }
        List<Limit> limits = new ArrayList<>();
        List<Node> limitNodes = yaml.list(yaml.required(fields, node, field, "limits"), field + ".limits");
        if (limitNodes.isEmpty()) {
            throw yaml.error(fields.get("limits"), field + ".limits", "at least one limit is needed");
        }
        for (int i = 0; i < limitNodes.size(); i++) {
            String where = field + ".limits[" + i + "]";
            String text = yaml.scalar(limitNodes.get(i), where);
            Limit limit = yaml.parsed(limitNodes.get(i), where, () -> Limit.parse(text));
            for (String option : List.of("burst", "refill")) {
                if (fields.containsKey(option) && Limit.givesOption(text, option)) { // one would replace the other
                    throw yaml.error(limitNodes.get(i), where, "\"" + text + "\" gives its own " + option + ", and the"
                            + " policy's " + option + " would replace it: give it in one place");
                }
            }
            if (refill != null) {
                limit = limit.withRefill(refill);
            }
            if (burst != null) {
                Limit unburst = limit;
                long b = burst;
                limit = yaml.parsed(fields.get("burst"), field + ".burst", () -> unburst.withBurst(b));
            }
            Limit alone = limit; // a limit's own problem (a burst its algorithm takes none of, too deep) at its line
            yaml.parsed(limitNodes.get(i), where, () -> Rule.of(algorithm, List.of(alone), Mode.REJECT, 0));
            int same = limits.indexOf(limit);
            if (same >= 0) { // twice the same limit decides as once: a slip, most likely for another one
                throw yaml.error(limitNodes.get(i), where, "the same limit as limits[" + same + "], " + limit);
            }
            limits.add(limit);
        }
        Cost cost = cost(fields, field);
        String modeText = fields.containsKey("mode") ? yaml.scalar(fields.get("mode"), field + ".mode") : "reject";
        boolean shadow = modeText.equals("shadow");
        Mode mode;
        switch (modeText) {
            case "reject", "shadow" -> mode = Mode.REJECT;
            case "delay" -> {
                mode = algorithm.delayMode();
                if (mode == Mode.DELAY && !algorithm.canDelay()) {
                    throw yaml.error(fields.get("mode"), field + ".mode", "delay mode is for token-bucket and gcra (and"
                            + " leaky-bucket, as a queue), not " + algorithm);
                }
            }
            // leaky-bucket's delay, under the name check, /v1/policies and simulate give it (a review found it
            // refused here, while those printed it)
            case "shaping" -> {
                if (algorithm != Algorithm.LEAKY_BUCKET) {
                    throw yaml.error(fields.get("mode"), field + ".mode", "shaping is leaky-bucket's queue; " + algorithm
                            + " delays with mode: delay");
                }
                mode = Mode.SHAPING;
            }
            default -> throw yaml.error(fields.get("mode"), field + ".mode",
                    "expected reject, delay or shadow (or shaping, leaky-bucket's delay), got \"" + modeText + "\"");
        }
        long maxDelay = 0;
        if (fields.containsKey("max_delay")) {
            // shaping too: a request whose turn in the queue is further off than max_delay is rejected instead
            if (mode != Mode.DELAY && mode != Mode.SHAPING) {
                throw yaml.error(fields.get("max_delay"), field + ".max_delay", "max_delay is for mode: delay (and "
                        + "leaky-bucket's shaping)");
            }
            // a queue's may be 0 (it lets a request in only when no turn is ahead of it), as simulate takes it
            maxDelay = mode == Mode.SHAPING ? yaml.duration(fields.get("max_delay"), field + ".max_delay")
                    : yaml.positiveDuration(fields.get("max_delay"), field + ".max_delay");
        } else if (mode == Mode.DELAY) {
            throw yaml.error(fields.containsKey("mode") ? fields.get("mode") : node, field + ".mode",
                    "mode: delay needs max_delay");
        } else if (mode == Mode.SHAPING) {
            maxDelay = Rule.NO_MAX_DELAY; // the queue's length its only bound
        }
        boolean skip = skipIfMissing(fields, field);
        Mode chosen = mode;
        long delay = maxDelay;
        // each limit is right alone (above), so what is left to refuse is the max delay's (too many refills)
        Node delayNode = fields.containsKey("max_delay") ? fields.get("max_delay") : node;
        Rule rule = yaml.parsed(delayNode, fields.containsKey("max_delay") ? field + ".max_delay" : field,
                () -> Rule.of(algorithm, limits, chosen, delay));
        if (onRedis) {
            decidableOnRedis(rule, limitNodes, fields.get("max_delay"), field);
        }
        fits(cost, rule, null, fields, field);
        return new PolicyConfig(name, match, List.copyOf(key), rule, null, cost.fixed(), cost.header(), shadow, skip);
    }

    /**
     * Refuses a fixed cost that no request could ever be admitted at, past the capacity of a limit: every request of
     * the policy was rejected for ever, {@code retry_after: -1}, and {@code check} said the file was fine (a review
     * found it). A fixed cost of 0 is refused too: it charges nothing, so the policy admitted every request and
     * limited none, and {@code check} said nothing of it (a review found that as well).
     */
    private void fits(Cost cost, Rule rule, Limit inFlight, Map<String, Node> fields, String field)
            throws ConfigException {
        if (cost.header() != null || !fields.containsKey("cost")) {
            return;
        }
        if (cost.fixed() == 0) {
            throw yaml.error(fields.get("cost"), field + ".cost", "a cost of 0 charges nothing, so the policy would never"
                    + " limit a request: remove it, or use mode: shadow to watch a limit without enforcing it");
        }
        boolean never;
        try {
            never = rule != null ? rule.decide(null, 0, cost.fixed()).decision().never() : cost.fixed() > inFlight.amount();
        } catch (IllegalArgumentException e) { // past what the arithmetic holds
            never = true;
        }
        if (never) {
            throw yaml.error(fields.get("cost"), field + ".cost", "a cost of " + cost.fixed() + " is more than the policy's"
                    + " limits ever admit at once: every request would be rejected");
        }
    }

    /**
     * Refuses a rule the Redis store could not decide exactly ({@link RedisStore#checkExact}: Lua's numbers are
     * doubles), naming the limit, or the max delay, that is beyond it: loaded, such a rule would fail every decision.
     */
    private void decidableOnRedis(Rule rule, List<Node> limitNodes, Node maxDelay, String field)
            throws ConfigException {
        for (int i = 0; i < rule.limits().size(); i++) {
            Rule one = Rule.of(rule.algorithm(), List.of(rule.limits().get(i)), Mode.REJECT, 0);
            yaml.parsed(limitNodes.get(i), field + ".limits[" + i + "]", () -> {
                RedisStore.checkExact(one);
                return one;
            });
        }
        if (maxDelay != null) { // the limits fit, so only the max delay can be beyond
            yaml.parsed(maxDelay, field + ".max_delay", () -> {
                RedisStore.checkExact(rule);
                return rule;
            });
        }
    }

    /**
     * Every part of the key can be read from what the policy matches: an Envoy descriptor carries only its entries
     * (so {@code descriptor:KEY}, for a key of the pattern, or {@code const:TEXT}), and an HTTP request none.
     */
    private void keyReadable(List<Node> nodes, List<KeyPart> key, PolicyConfig.Match match, String field)
            throws ConfigException {
        for (int i = 0; i < key.size(); i++) {
            KeyPart part = key.get(i);
            String where = field + ".key[" + i + "]";
            if (match.domain() == null && part instanceof KeyPart.DescriptorValue) {
                throw yaml.error(nodes.get(i), where, part + " reads an Envoy descriptor: the policy needs match.domain and"
                        + " match.descriptor");
            }
            if (match.domain() != null && !(part instanceof KeyPart.Const)
                    && !(part instanceof KeyPart.DescriptorValue value
                    && match.descriptor().stream().anyMatch(entry -> entry.key().equals(value.key())))) {
                throw yaml.error(nodes.get(i), where, "an Envoy descriptor carries only its entries: expected descriptor:KEY"
                        + " with a KEY of match.descriptor " + match.descriptor() + ", or const:TEXT, got \"" + part + "\"");
            }
        }
    }

    /**
     * What Envoy's rate limit service cannot do: answer "later" (Envoy forwards or refuses at once), tell when a
     * request is over (no concurrency), or carry a cost in a header (a descriptor's cost is its hits_addend).
     */
    private void envoyDecidable(Map<String, Node> fields, Node algorithm, String algorithmName, String field)
            throws ConfigException {
        if (algorithmName.equals("concurrency")) {
            throw yaml.error(algorithm, field + ".algorithm", "Envoy does not tell the rate limit service when a request"
                    + " is over, so a policy of match.domain cannot count requests in flight");
        }
        if (fields.containsKey("mode") && yaml.scalar(fields.get("mode"), field + ".mode").equals("delay")) {
            throw yaml.error(fields.get("mode"), field + ".mode", "Envoy admits or refuses a request at once, so a policy of"
                    + " match.domain cannot delay it: use reject or shadow");
        }
        if (fields.containsKey("cost") && yaml.scalar(fields.get("cost"), field + ".cost").startsWith("header:")) {
            throw yaml.error(fields.get("cost"), field + ".cost", "a descriptor has no headers: its cost is its hits_addend"
                    + " times a whole-number cost");
        }
    }

    /** A cost: a fixed number, or the name of the header that carries it. */
    private record Cost(long fixed, String header) {
    }

    private Cost cost(Map<String, Node> fields, String field) throws ConfigException {
        if (!fields.containsKey("cost")) {
            return new Cost(1, null);
        }
        String text = yaml.scalar(fields.get("cost"), field + ".cost");
        if (text.startsWith("header:")) {
            String header = text.substring("header:".length());
            if (!KeyPart.NAME.matcher(header).matches()) {
                throw yaml.error(fields.get("cost"), field + ".cost", "bad header name \"" + header + "\"");
            }
            return new Cost(1, header);
        }
        return new Cost(yaml.whole(fields.get("cost"), field + ".cost", 0), null);
    }

    private boolean skipIfMissing(Map<String, Node> fields, String field) throws ConfigException {
        if (!fields.containsKey("skip_if_missing")) {
            return false;
        }
        return yaml.flag(fields.get("skip_if_missing"), field + ".skip_if_missing");
    }

    /**
     * A concurrency policy: one limit {@code N/LEASE} ({@code 10/30s}: at most 10 in flight per key, a lease held
     * at most 30 s if its request never ends), mode reject or shadow.
     */
    private PolicyConfig concurrencyPolicy(Node node, Map<String, Node> fields, String field, String name,
                                           PolicyConfig.Match match, List<KeyPart> key) throws ConfigException {
        for (String rateOnly : List.of("burst", "refill", "max_delay")) {
            if (fields.containsKey(rateOnly)) {
                throw yaml.error(fields.get(rateOnly), field + "." + rateOnly, rateOnly + " is for rate limits, not concurrency");
            }
        }
        List<Node> limitNodes = yaml.list(yaml.required(fields, node, field, "limits"), field + ".limits");
        if (limitNodes.size() != 1) {
            throw yaml.error(fields.get("limits"), field + ".limits", "a concurrency policy has one limit N/LEASE, as in"
                    + " [10/30s]: at most 10 in flight per key, a lease held at most 30 s");
        }
        String text = yaml.scalar(limitNodes.get(0), field + ".limits[0]");
        Limit limit = yaml.parsed(limitNodes.get(0), field + ".limits[0]", () -> Limit.parse(text));
        if (!limit.equals(Limit.of(limit.amount(), limit.periodNanos()))) {
            throw yaml.error(limitNodes.get(0), field + ".limits[0]", "a concurrency limit has no burst or refill, got \"" + text + "\"");
        }
        if (limit.amount() > ConcurrencyLimiter.DEFAULT_MAX_PLACES) { // more could never be held: said, not capped
            throw yaml.error(limitNodes.get(0), field + ".limits[0]", "a concurrency policy holds at most "
                    + ConcurrencyLimiter.DEFAULT_MAX_PLACES + " places at once over all its keys, got \"" + text + "\"");
        }
        String mode = fields.containsKey("mode") ? yaml.scalar(fields.get("mode"), field + ".mode") : "reject";
        if (!mode.equals("reject") && !mode.equals("shadow")) {
            throw yaml.error(fields.get("mode"), field + ".mode", "a concurrency policy rejects or shadows, got \"" + mode + "\"");
        }
        Cost cost = cost(fields, field);
        fits(cost, null, limit, fields, field);
        return new PolicyConfig(name, match, key, null, limit, cost.fixed(), cost.header(), mode.equals("shadow"),
                skipIfMissing(fields, field));
    }

    private PolicyConfig.Match match(Node node, String field) throws ConfigException {
        Map<String, Node> fields = yaml.fields(node, field + ".", MATCH);
        PathGlob path = null;
        if (fields.containsKey("path")) {
            String glob = yaml.scalar(fields.get("path"), field + ".path");
            path = yaml.parsed(fields.get("path"), field + ".path", () -> {
                try {
                    return PathGlob.compile(glob);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("bad glob \"" + glob + "\": " + e.getMessage());
                }
            });
        }
        List<String> methods = null;
        if (fields.containsKey("methods")) {
            methods = new ArrayList<>();
            List<Node> items = yaml.list(fields.get("methods"), field + ".methods");
            if (items.isEmpty()) {
                throw yaml.error(fields.get("methods"), field + ".methods", "an empty list matches no request; list the"
                        + " methods, or leave methods out to match every one");
            }
            for (int i = 0; i < items.size(); i++) {
                String method = yaml.scalar(items.get(i), field + ".methods[" + i + "]");
                if (!METHOD.matcher(method).matches()) {
                    throw yaml.error(items.get(i), field + ".methods[" + i + "]",
                            "expected an HTTP method in capitals such as GET, got \"" + method + "\"");
                }
                methods.add(method);
            }
            methods = List.copyOf(methods);
        }
        String host = fields.containsKey("host") ? yaml.scalar(fields.get("host"), field + ".host").toLowerCase(Locale.ROOT) : null;
        if (host != null && host.isEmpty()) {
            throw yaml.error(fields.get("host"), field + ".host", "must not be empty; leave host out to match every host");
        }
        if (host != null && !host.chars().allMatch(c -> c > ' ' && c != 0x7F && "*/@?#\\".indexOf(c) < 0)) {
            // a Host header carries none of these, and none matches a pattern: *.example.com matched no host, and its
            // policy limited nothing without a word (a review found it)
            throw yaml.error(fields.get("host"), field + ".host", "\"" + host + "\" is no host a Host header carries (no"
                    + " wildcards, spaces, / @ ? #): one host is matched whole, in any case");
        }
        if (host != null && !host.startsWith("[") && host.indexOf(':') != host.lastIndexOf(':')) {
            throw yaml.error(fields.get("host"), field + ".host", "an IPv6 address is written in brackets, as a Host header"
                    + " carries it: \"[" + host + "]\"");
        }
        if (host != null && !host.equals(HeaderText.hostWithoutPort(host))) {
            // requests are matched on their Host without its port or a final dot, so a host with one never matches
            throw yaml.error(fields.get("host"), field + ".host", "a host is matched without its "
                    + (host.endsWith(".") ? "final dot" : "port") + ": write \"" + HeaderText.hostWithoutPort(host)
                    + "\", not \"" + host + "\"");
        }
        Map<String, String> headers = fields.containsKey("headers") ? headers(fields.get("headers"), field + ".headers")
                : null;
        if (!fields.containsKey("domain") && !fields.containsKey("descriptor")) {
            return new PolicyConfig.Match(path, methods, host, headers);
        }
        for (String http : List.of("path", "methods", "host", "headers")) {
            if (fields.containsKey(http)) {
                throw yaml.error(fields.get(http), field + "." + http, "a policy of match.domain decides descriptors from Envoy,"
                        + " which have no " + http + "; match HTTP requests in a policy of their own");
            }
        }
        String domain = yaml.scalar(yaml.required(fields, node, field, "domain"), field + ".domain");
        if (domain.isEmpty()) {
            throw yaml.error(fields.get("domain"), field + ".domain", "must not be empty");
        }
        List<Node> items = yaml.list(yaml.required(fields, node, field, "descriptor"), field + ".descriptor");
        if (items.isEmpty()) {
            throw yaml.error(fields.get("descriptor"), field + ".descriptor", "at least one entry is needed, KEY or KEY=VALUE");
        }
        List<Descriptor.Entry> descriptor = new ArrayList<>();
        for (int i = 0; i < items.size(); i++) {
            String text = yaml.scalar(items.get(i), field + ".descriptor[" + i + "]");
            int equals = text.indexOf('=');
            String entryKey = equals < 0 ? text : text.substring(0, equals);
            if (!KeyPart.DescriptorValue.KEY.matcher(entryKey).matches()) {
                throw yaml.error(items.get(i), field + ".descriptor[" + i + "]", "expected KEY or KEY=VALUE (a KEY without"
                        + " spaces), got \"" + text + "\"");
            }
            for (int j = 0; j < descriptor.size(); j++) {
                if (descriptor.get(j).key().equals(entryKey)) { // as an Envoy file's path is refused (a review found it)
                    throw yaml.error(items.get(i), field + ".descriptor[" + i + "]", "key \"" + entryKey + "\" is in the"
                            + " pattern already, at descriptor[" + j + "]; Sluice counts a descriptor by the values of"
                            + " its keys, so each key once");
                }
            }
            descriptor.add(new Descriptor.Entry(entryKey, equals < 0 ? null : text.substring(equals + 1)));
        }
        return new PolicyConfig.Match(null, null, null, domain, List.copyOf(descriptor));
    }
}
