package dev.sluice.server.config;

import dev.sluice.Algorithm;
import dev.sluice.ConcurrencyLimiter;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.PathGlob;
import dev.sluice.server.request.TrustedProxies;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.InMemoryStore;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.nodes.Tag;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.SequenceNode;
import org.yaml.snakeyaml.reader.ReaderException;
import org.yaml.snakeyaml.reader.StreamReader;

import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * Reads {@code sluice.yaml} and checks every field, so that a bad file is refused whole, with a message that
 * names the file, the line and the field: {@code sluice.yaml:14: policies[1].limits[0]: bad limit "10/0s": ...}.
 *
 * <p>The YAML is read as a tree of nodes that remember where they stood in the file (the YAML engine under
 * Jackson's YAML module), not bound to classes: binding would lose the lines.
 */
public final class ConfigLoader {
    private static final Set<String> TOP = Set.of("store", "store_trust", "store_connect", "store_password_file",
            "store_password_env", "on_store_failure",
            "store_timeout", "max_keys", "reject_status", "reject_body",
            "trusted_proxies", "headers", "envoy_headers", "policies", "envoy_configs", "envoy_merge_domains",
            "dashboard_keys");
    /** The most {@code max_keys} may be, of every store together: at about 100 bytes a key, 10 GB of heap. */
    private static final long MOST_KEYS = 100_000_000;
    /** The pool of {@code sluice_store_keys} that is the store the policies share. */
    public static final String SHARED_POOL = "shared";
    /** The longest store_timeout: a day, the Redis store's bound. */
    private static final long MOST_STORE_TIMEOUT = 86_400_000_000_000L;
    private static final Set<String> POLICY = Set.of("name", "match", "key", "algorithm", "limits", "burst", "refill",
            "cost", "mode", "max_delay", "skip_if_missing", "reject_status", "reject_body", "replaces", "max_keys");
    private static final Set<String> MATCH = Set.of("path", "methods", "host", "headers", "domain", "descriptor");
    /** A header's name, as HTTP writes one (a token). */
    private static final Pattern HEADER_NAME = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]*");
    private static final Pattern METHOD = Pattern.compile("[A-Z]+");

    private final String file;

    private ConfigLoader(String file) {
        this.file = file;
    }

    /** Reads and checks {@code path}. */
    public static ServerConfig load(Path path) throws ConfigException {
        return parse(path.toString(), TextFile.read(path));
    }

    /** Checks {@code text}, read from {@code file} (named in messages). */
    public static ServerConfig parse(String file, String text) throws ConfigException {
        return new ConfigLoader(file).config(text);
    }

    /** A loader whose messages name {@code file}: Envoy's configuration files are read with its node checks. */
    static ConfigLoader of(String file) {
        return new ConfigLoader(file);
    }

    /**
     * The longest line read, in chars. SnakeYAML keeps a token it scans (a comment, a scalar) in a window it copies
     * again at every 1,024 chars it reads, so one long line costs the square of its length: 4 MiB took 7 s, 16 MiB
     * (the largest file read) would take minutes. No configuration needs a line of this length; a flow list that
     * long can be written one item a line.
     */
    static final int MAX_LINE = 1 << 20;

    /** The YAML tree of {@code text}, or null for an empty file. */
    Node compose(String text) throws ConfigException {
        checkLines(text);
        try (Reader reader = new StringReader(text)) {
            LoaderOptions options = new LoaderOptions();
            options.setCodePointLimit(TextFile.MAX_BYTES); // as large as a file read may be (3 MiB by default: a review)
            return new Yaml(options).compose(reader);
        } catch (MarkedYAMLException e) {
            int line = e.getProblemMark() == null ? 1 : e.getProblemMark().getLine() + 1;
            throw new ConfigException(file + ":" + line + ": not valid YAML: " + e.getProblem());
        } catch (ReaderException e) {
            // a character YAML does not allow (a control character): SnakeYAML checks the text it has buffered
            // before it marks lines, and its position counts from that buffer's start (1,024 chars), so the
            // character is found again here, and its line counted from the start of the text
            int at = 0;
            while (at < text.length() && StreamReader.isPrintable(text.codePointAt(at))) {
                at += Character.charCount(text.codePointAt(at));
            }
            long line = 1 + text.substring(0, at).chars().filter(c -> c == '\n').count();
            int codePoint = at < text.length() ? text.codePointAt(at) : e.getCodePoint();
            throw new ConfigException(file + ":" + line + ": not valid YAML: " + e.getMessage()
                    + String.format(" (U+%04X)", codePoint));
        } catch (IOException | RuntimeException e) {
            throw new ConfigException(file + ":1: not valid YAML: " + e.getMessage());
        }
    }

    /** Refuses a line longer than {@link #MAX_LINE}, naming it. */
    private void checkLines(String text) throws ConfigException {
        int line = 1;
        int start = 0;
        for (int at = 0; at <= text.length(); at++) {
            if (at == text.length() || text.charAt(at) == '\n') {
                if (at - start > MAX_LINE) {
                    throw new ConfigException(file + ":" + line + ": a line of " + (at - start) + " characters, longer"
                            + " than the " + MAX_LINE + " read: break it up (a list may take one item a line)");
                }
                line++;
                start = at + 1;
            }
        }
    }

    private ServerConfig config(String text) throws ConfigException {
        Node root = compose(text);
        if (root == null) {
            throw new ConfigException(file + ":1: the file is empty; it needs at least policies:");
        }
        Map<String, Node> top = fields(root, "", TOP);
        String store = top.containsKey("store") ? store(top.get("store")) : "memory";
        FailurePolicy onFailure = FailurePolicy.OPEN;
        if (top.containsKey("on_store_failure")) {
            String value = scalar(top.get("on_store_failure"), "on_store_failure");
            switch (value) {
                case "open" -> onFailure = FailurePolicy.OPEN;
                case "closed" -> onFailure = FailurePolicy.CLOSED;
                default -> throw error(top.get("on_store_failure"), "on_store_failure",
                        "expected open or closed, got \"" + value + "\"");
            }
        }
        long timeout = top.containsKey("store_timeout")
                ? positiveDuration(top.get("store_timeout"), "store_timeout") : 50_000_000L;
        if (timeout > MOST_STORE_TIMEOUT) { // the Redis store's bound, told at its line (a review found it "cannot connect")
            throw error(top.get("store_timeout"), "store_timeout", "at most 1d (a decision waits that long at most),"
                    + " got \"" + scalar(top.get("store_timeout"), "store_timeout") + "\"");
        }
        if (timeout < 1_000_000L) { // a review found 1ns taken: every decision the failure policy's, and not a word
            throw error(top.get("store_timeout"), "store_timeout", "at least 1ms (below it Redis's answers would come"
                    + " too late, and every decision would be the failure policy's), got \""
                    + scalar(top.get("store_timeout"), "store_timeout") + "\"");
        }
        Path trust = null;
        if (top.containsKey("store_trust")) {
            Node node = top.get("store_trust");
            if (!RedisStore.speaksTls(store)) {
                throw error(node, "store_trust", "the certificates a TLS store trusts; the store is not one (rediss://,"
                        + " rediss-cluster:// or rediss-sentinel://), got " + RedisStore.shown(store));
            }
            String path = scalar(node, "store_trust");
            try {
                trust = base().resolve(path);
                RedisStore.checkTrust(trust);
            } catch (InvalidPathException e) {
                throw error(node, "store_trust", "\"" + path + "\" is not a path: " + e.getReason());
            } catch (IllegalArgumentException e) {
                throw error(node, "store_trust", e.getMessage());
            }
        }
        ServerConfig.StorePassword password = storePassword(top, store);
        boolean inBackground = false;
        if (top.containsKey("store_connect")) {
            Node node = top.get("store_connect");
            String value = scalar(node, "store_connect");
            if (!value.equals("now") && !value.equals("background")) {
                throw error(node, "store_connect", "expected now or background, got \"" + value + "\"");
            }
            inBackground = value.equals("background");
            if (inBackground && store.equals("memory")) {
                throw error(node, "store_connect", "the in-memory store has nothing to connect to");
            }
            try {
                if (inBackground) {
                    RedisStore.checkConnectInBackground(store);
                }
            } catch (IllegalArgumentException e) {
                throw error(node, "store_connect", e.getMessage());
            }
        }
        long maxKeys = top.containsKey("max_keys") ? maxKeys(top.get("max_keys"), "max_keys", store)
                : InMemoryStore.DEFAULT_MAX_KEYS;
        boolean keysShown = false;
        if (top.containsKey("dashboard_keys")) {
            String value = scalar(top.get("dashboard_keys"), "dashboard_keys");
            if (!value.equals("masked") && !value.equals("shown")) {
                throw error(top.get("dashboard_keys"), "dashboard_keys", "expected masked (the default: a key's"
                        + " headers, cookies, query parameters, users and descriptor values masked) or shown, got \""
                        + value + "\"");
            }
            keysShown = value.equals("shown");
        }
        List<String> proxies = new ArrayList<>();
        if (top.containsKey("trusted_proxies")) {
            List<Node> items = list(top.get("trusted_proxies"), "trusted_proxies");
            for (int i = 0; i < items.size(); i++) {
                proxies.add(cidr(items.get(i), "trusted_proxies[" + i + "]"));
            }
        }
        Set<ServerConfig.HeaderSet> headers = top.containsKey("headers") ? headerSets(top.get("headers"), "headers")
                : EnumSet.allOf(ServerConfig.HeaderSet.class);
        // none by default in the answers to Envoy, as Envoy's own service sends none unless told: Envoy adds them to
        // every answer it passes on, and its own enable_x_ratelimit_headers adds X-RateLimit-* again (a review)
        Set<ServerConfig.HeaderSet> envoyHeaders = top.containsKey("envoy_headers")
                ? headerSets(top.get("envoy_headers"), "envoy_headers") : EnumSet.noneOf(ServerConfig.HeaderSet.class);
        if (!top.containsKey("policies") && !top.containsKey("envoy_configs")) {
            throw new ConfigException(file + ":" + line(root) + ": policies: missing; at least one policy is needed");
        }
        List<Node> items = top.containsKey("policies") ? list(top.get("policies"), "policies") : List.of();
        if (items.isEmpty() && !top.containsKey("envoy_configs")) {
            throw error(top.get("policies"), "policies", "at least one policy is needed");
        }
        PolicyConfig.Rejection rejection = new PolicyConfig.Rejection(top.containsKey("reject_status")
                ? rejectStatus(top.get("reject_status"), "reject_status") : PolicyConfig.DEFAULT_REJECT_STATUS,
                top.containsKey("reject_body") ? rejectBody(top.get("reject_body"), "reject_body") : null);
        List<PolicyConfig> policies = new ArrayList<>();
        Map<String, Integer> names = new HashMap<>();
        long allKeys = maxKeys; // the keys of every in-memory store: the shared one's and the policies' own
        for (int i = 0; i < items.size(); i++) {
            PolicyConfig policy = policy(items.get(i), "policies[" + i + "]", !store.equals("memory"));
            Node status = valueOf(items.get(i), "reject_status");
            Node body = valueOf(items.get(i), "reject_body");
            for (Node own : new Node[] {status, body}) {
                if (own != items.get(i) && policy.match().domain() != null) {
                    throw error(own, "policies[" + i + "]." + (own == status ? "reject_status" : "reject_body"), "is for"
                            + " HTTP requests; Envoy answers a descriptor over its limit as its rate limit filter is"
                            + " told (rate_limited_status)");
                }
            }
            if (policy.match().domain() == null) {
                policy = policy.withRejection(new PolicyConfig.Rejection(status != items.get(i)
                        ? rejectStatus(status, "policies[" + i + "].reject_status") : rejection.status(),
                        body != items.get(i) ? rejectBody(body, "policies[" + i + "].reject_body") : rejection.body()));
            }
            Node most = valueOf(items.get(i), "max_keys");
            if (most != items.get(i)) {
                if (policy.inFlight() != null) {
                    throw error(most, "policies[" + i + "].max_keys", "is for rate policies; a concurrency policy"
                            + " holds its own places, at most " + dev.sluice.ConcurrencyLimiter.DEFAULT_MAX_PLACES
                            + " leases at once");
                }
                String field = "policies[" + i + "].max_keys";
                policy = policy.withMaxKeys(maxKeys(most, field, store));
                if (policy.name().equals(SHARED_POOL)) {
                    // its pool would be the shared store's in sluice_store_keys{pool} (a review found it taken over)
                    throw error(most, field, "a policy named " + SHARED_POOL + " cannot have a store of its own:"
                            + " sluice_store_keys{pool=\"" + SHARED_POOL + "\"} is the store the policies share;"
                            + " rename the policy");
                }
                allKeys += policy.maxKeys();
                if (allKeys > MOST_KEYS) {
                    throw error(most, field, "the stores together hold at most " + MOST_KEYS + " keys (about 100"
                            + " bytes of heap a key), and max_keys " + maxKeys + " and the policies' own so far come to "
                            + allKeys);
                }
            }
            // told at the field's own line, wherever it stands in the policy (a review found them at the first)
            Integer first = names.putIfAbsent(policy.name(), line(valueOf(items.get(i), "name")));
            if (first != null) {
                throw error(valueOf(items.get(i), "name"), "policies[" + i + "].name", "duplicate policy name \""
                        + policy.name() + "\" (first at line " + first + ")");
            }
            if (policy.inFlight() != null && !store.equals("memory")) {
                throw error(valueOf(items.get(i), "algorithm"), "policies[" + i + "].algorithm", "concurrency is counted in the memory of each server,"
                        + " so servers sharing " + RedisStore.shown(store) + " would each count their own; use store: memory");
            }
            policies.add(policy);
        }
        policies = withReplaces(items, policies);
        ServerConfig.Envoy envoy = ServerConfig.Envoy.NONE;
        boolean mergeDomains = false;
        if (top.containsKey("envoy_merge_domains")) {
            String value = scalar(top.get("envoy_merge_domains"), "envoy_merge_domains");
            if (!value.equals("true") && !value.equals("false")) {
                throw error(top.get("envoy_merge_domains"), "envoy_merge_domains", "expected true or false, got \""
                        + value + "\"");
            }
            if (!top.containsKey("envoy_configs")) {
                throw error(top.get("envoy_merge_domains"), "envoy_merge_domains", "it is for the files of"
                        + " envoy_configs, and there are none");
            }
            mergeDomains = value.equals("true");
        }
        if (top.containsKey("envoy_configs")) {
            EnvoyConfigFiles read = new EnvoyConfigFiles(names, file, !store.equals("memory"), mergeDomains);
            List<Node> paths = list(top.get("envoy_configs"), "envoy_configs");
            if (paths.isEmpty()) {
                throw error(top.get("envoy_configs"), "envoy_configs", "at least one file or directory is needed");
            }
            for (int i = 0; i < paths.size(); i++) {
                String where = "envoy_configs[" + i + "]";
                String path = scalar(paths.get(i), where);
                Path resolved;
                try {
                    if (path.isEmpty()) { // would be the directory of this very file
                        throw new InvalidPathException(path, "empty; name a file or directory");
                    }
                    resolved = base().resolve(path);
                } catch (InvalidPathException e) {
                    throw new ConfigException(error(paths.get(i), where, "\"" + path.replace("\u0000", "\\0")
                            + "\" is not a path: " + e.getReason()).getMessage(), read.files());
                }
                String problem;
                try {
                    problem = read.read(resolved);
                } catch (ConfigException e) {
                    throw new ConfigException(e.getMessage(), read.files());
                }
                if (problem != null) {
                    throw new ConfigException(error(paths.get(i), where, problem).getMessage(), read.files());
                }
            }
            policies.addAll(read.policies());
            // files that give no limit at all (only unlimited descriptors, an empty directory) are taken, as Envoy's
            // service takes them: calls are then OK; refused, a reload that set every limit unlimited, to switch
            // limits off, kept the old ones in force (a review compared the two)
            envoy = read.envoy();
        }
        return new ServerConfig(store, onFailure, timeout, maxKeys, List.copyOf(proxies), headers, envoyHeaders,
                List.copyOf(policies), envoy, top.containsKey("store") ? line(top.get("store")) : 0, trust,
                inBackground, password, keysShown);
    }

    /**
     * A {@code max_keys}: the most keys an in-memory store holds, the one every policy shares or a policy's own
     * (nginx's zone); Redis has no such bound.
     */
    private long maxKeys(Node node, String field, String store) throws ConfigException {
        if (!store.equals("memory")) {
            throw error(node, field, "bounds the in-memory store only; Redis keeps keys until their TTL, bounded"
                    + " by its own maxmemory");
        }
        long most = whole(node, field, 1);
        if (most > MOST_KEYS) {
            throw error(node, field, "at most " + MOST_KEYS + " (about 100 bytes of heap a key), got " + most);
        }
        return most;
    }

    /**
     * The Redis store's password given apart from its address, from a secret: {@code store_password_file} (a file, as
     * Kubernetes mounts a Secret: its text, one line break at its end left out, relative to this file) or
     * {@code store_password_env} (an environment variable, as Envoy's service takes {@code REDIS_AUTH}); one of the
     * two, with a Redis store whose address has no password; null without either.
     */
    private ServerConfig.StorePassword storePassword(Map<String, Node> top, String store) throws ConfigException {
        Node file = top.get("store_password_file");
        Node variable = top.get("store_password_env");
        if (file == null && variable == null) {
            return null;
        }
        String field = file != null ? "store_password_file" : "store_password_env";
        Node node = file != null ? file : variable;
        if (file != null && variable != null) {
            throw error(variable, "store_password_env", "the password is given by store_password_file already (line "
                    + line(file) + "); give one of the two");
        }
        if (store.equals("memory")) {
            throw error(node, field, "the password of a Redis store; the store is memory");
        }
        try {
            if (RedisStore.hasPassword(store)) {
                throw error(node, field, "the store's address has a password of its own (" + RedisStore.shown(store)
                        + "); give it once");
            }
        } catch (IllegalArgumentException e) {
            throw error(top.get("store"), "store", e.getMessage());
        }
        String name = scalar(node, field);
        String value;
        Path path = null;
        if (file != null) {
            try {
                path = base().resolve(name);
            } catch (InvalidPathException e) {
                throw error(node, field, "\"" + name + "\" is not a path: " + e.getReason());
            }
            try {
                value = TextFile.read(path); // as the watch reads it: bounded, strict UTF-8
            } catch (ConfigException e) {
                throw error(node, field, e.getMessage());
            }
            value = value.endsWith("\r\n") ? value.substring(0, value.length() - 2)
                    : value.endsWith("\n") ? value.substring(0, value.length() - 1) : value;
            if (value.isEmpty()) {
                throw error(node, field, path + ": holds no password (the file is empty)");
            }
            if (value.indexOf('\n') >= 0) {
                throw error(node, field, path + ": holds more than one line; a password is one");
            }
        } else {
            if (!name.matches("[A-Za-z_][A-Za-z0-9_]*")) {
                throw error(node, field, "expected the name of an environment variable, such as REDIS_PASSWORD, got \""
                        + name + "\"");
            }
            value = System.getenv(name);
            if (value == null || value.isEmpty()) {
                throw error(node, field, "the environment variable " + name + " is " + (value == null ? "not set"
                        : "empty"));
            }
        }
        return new ServerConfig.StorePassword(path, file != null ? null : name, value);
    }

    /**
     * {@code match.headers}: each header's name and the value its first value must be, names compared in any case,
     * values exactly.
     */
    private Map<String, String> headers(Node node, String field) throws ConfigException {
        if (!(node instanceof MappingNode mapping) || mapping.getValue().isEmpty()) {
            throw error(node, field, "expected a mapping of header names to values, such as {X-Plan: premium}");
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (NodeTuple tuple : mapping.getValue()) {
            String name = scalar(tuple.getKeyNode(), field);
            if (!HEADER_NAME.matcher(name).matches()) {
                throw error(tuple.getKeyNode(), field, "\"" + name + "\" is no header name");
            }
            String value = scalar(tuple.getValueNode(), field + "." + name);
            if (!value.equals(value.strip())) {
                throw error(tuple.getValueNode(), field + "." + name, "\"" + value + "\" never matches: a header's value"
                        + " is read without the spaces around it");
            }
            if (headers.put(name.toLowerCase(Locale.ROOT), value) != null) {
                throw error(tuple.getKeyNode(), field + "." + name, "given twice (header names are one in any case)");
            }
        }
        return java.util.Collections.unmodifiableMap(headers);
    }

    /**
     * {@code replaces} of each policy: the HTTP policies of the file it takes the place of, each named once; a
     * policy of Envoy's descriptors has Envoy's own {@code replaces} instead.
     */
    private List<PolicyConfig> withReplaces(List<Node> items, List<PolicyConfig> policies) throws ConfigException {
        Map<String, PolicyConfig> byName = byName(policies);
        List<PolicyConfig> replacing = new ArrayList<>(policies);
        for (int i = 0; i < items.size(); i++) {
            Node node = valueOf(items.get(i), "replaces");
            if (node == items.get(i)) {
                continue;
            }
            String field = "policies[" + i + "].replaces";
            PolicyConfig policy = policies.get(i);
            if (policy.match().domain() != null) {
                throw error(node, field, "is for HTTP requests; a policy of Envoy's descriptors is replaced as in"
                        + " Envoy's files (a limit's replaces)");
            }
            List<Node> names = list(node, field);
            if (names.isEmpty()) {
                throw error(node, field, "an empty list replaces nothing; name the policies, or leave replaces out");
            }
            List<String> replaced = new ArrayList<>();
            for (int j = 0; j < names.size(); j++) {
                String name = scalar(names.get(j), field + "[" + j + "]");
                PolicyConfig other = byName.get(name);
                String why = other == null ? "no policy of this file is named \"" + name + "\""
                        : other == policy ? "a policy cannot replace itself"
                        : other.match().domain() != null ? "\"" + name + "\" decides Envoy's descriptors, not HTTP requests"
                        : replaced.contains(name) ? "\"" + name + "\" is named twice" : null;
                if (why != null) {
                    throw error(names.get(j), field + "[" + j + "]", why);
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
                throw error(list(valueOf(items.get(item), "replaces"), "").get(entry), "policies[" + item
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

    /**
     * The status of a request a policy rejects, as nginx's {@code limit_req_status}: an error, a client's or the
     * server's, so that no client takes a rejection for an answer.
     */
    private int rejectStatus(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        if (!text.matches("[45][0-9][0-9]")) {
            throw error(node, field, "expected an HTTP status from 400 to 599, such as 429 (the default) or 503"
                    + " (nginx's), got \"" + text + "\"");
        }
        return Integer.parseInt(text);
    }

    /**
     * The body of a rejection, as Kong's {@code error_message} lets it be said: a JSON object, written in the file as
     * its text, sent as it is ({@code application/json}); the wait is in {@code Retry-After}.
     */
    private String rejectBody(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        try {
            com.fasterxml.jackson.databind.JsonNode read = StrictJson.READER.readTree(text);
            if (read == null || !read.isObject()) {
                throw error(node, field, "expected a JSON object, such as '{\"message\": \"API rate limit exceeded\"}',"
                        + " got \"" + text + "\"");
            }
            return read.toString();
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw error(node, field, "not JSON: " + e.getOriginalMessage() + "; expected a JSON object, such as"
                    + " '{\"message\": \"API rate limit exceeded\"}'");
        }
    }

    /** The sets of response headers {@code node}, a list of {@code ietf} and {@code legacy}, names. */
    private Set<ServerConfig.HeaderSet> headerSets(Node node, String field) throws ConfigException {
        Set<ServerConfig.HeaderSet> sets = EnumSet.noneOf(ServerConfig.HeaderSet.class);
        List<Node> items = list(node, field);
        for (int i = 0; i < items.size(); i++) {
            String value = scalar(items.get(i), field + "[" + i + "]");
            switch (value) {
                case "ietf" -> sets.add(ServerConfig.HeaderSet.IETF);
                case "legacy" -> sets.add(ServerConfig.HeaderSet.LEGACY);
                default -> throw error(items.get(i), field + "[" + i + "]", "expected ietf or legacy, got \"" + value + "\"");
            }
        }
        return sets;
    }

    /** What each of {@code paths} (the keys of {@link ServerConfig.Envoy#files()}) holds now, as that map says it. */
    public static Map<Path, String> snapshot(Set<Path> paths) {
        Map<Path, String> now = new HashMap<>();
        for (Path path : paths) {
            now.put(path, EnvoyConfigFiles.snapshot(path));
        }
        return now;
    }

    /**
     * Whether any of {@code files} (what {@link ServerConfig.Envoy#files()} or {@link ConfigException#read()} saw)
     * holds something else now, or is gone, or has come.
     */
    public static boolean changed(Map<Path, String> files) {
        for (Map.Entry<Path, String> file : files.entrySet()) {
            if (!file.getValue().equals(EnvoyConfigFiles.snapshot(file.getKey()))) {
                return true;
            }
        }
        return false;
    }

    /** Where the paths of {@code envoy_configs} start from: this file's directory. */
    private Path base() {
        if (file.startsWith("classpath:")) { // a file inside an application: its paths are from the working directory
            return Path.of("").toAbsolutePath();
        }
        Path parent = Path.of(file).toAbsolutePath().getParent();
        return parent == null ? Path.of("").toAbsolutePath() : parent;
    }

    private PolicyConfig policy(Node node, String field, boolean onRedis) throws ConfigException {
        Map<String, Node> fields = fields(node, field + ".", POLICY);
        String name = scalar(required(fields, node, field, "name"), field + ".name");
        if (!NAME.matcher(name).matches()) {
            throw error(fields.get("name"), field + ".name",
                    "expected letters, digits, '.', '_' or '-', got \"" + name + "\"");
        }
        PolicyConfig.Match match = fields.containsKey("match")
                ? match(fields.get("match"), field + ".match") : PolicyConfig.Match.ALL;
        List<KeyPart> key = new ArrayList<>();
        List<Node> parts = list(required(fields, node, field, "key"), field + ".key");
        if (parts.isEmpty()) {
            throw error(fields.get("key"), field + ".key", "at least one key part is needed");
        }
        for (int i = 0; i < parts.size(); i++) {
            String where = field + ".key[" + i + "]";
            String text = scalar(parts.get(i), where);
            KeyPart part = parsed(parts.get(i), where, () -> KeyPart.parse(text));
            for (int j = 0; j < key.size(); j++) {
                // a slip, most likely for another part (header names are one in any case): refused as a limit given
                // twice is (a review found [ip, ip] taken silently)
                if (key.get(j).toString().equalsIgnoreCase(part.toString()) && (part instanceof KeyPart.Header
                        || key.get(j).equals(part))) {
                    throw error(parts.get(i), where, "key part \"" + text + "\" is given twice (also at " + field
                            + ".key[" + j + "]): the same part twice keys as once");
                }
            }
            key.add(part);
        }
        keyReadable(parts, key, match, field);
        Node algorithmNode = required(fields, node, field, "algorithm");
        String algorithmName = scalar(algorithmNode, field + ".algorithm");
        if (match.domain() != null) {
            envoyDecidable(fields, algorithmNode, algorithmName, field);
        }
        if (algorithmName.equals("concurrency")) {
            return concurrencyPolicy(node, fields, field, name, match, List.copyOf(key));
        }
        Algorithm algorithm = parsed(algorithmNode, field + ".algorithm", () -> {
            try {
                return Algorithm.parse(algorithmName);
            } catch (IllegalArgumentException e) { // a policy takes one more than the core's algorithms
                throw new IllegalArgumentException(e.getMessage() + ", concurrency");
            }
        });
        // what only some algorithms take is refused at its own line (Rule.of would name the policy only)
        if (fields.containsKey("burst") && !algorithm.hasBurst()) {
            throw error(fields.get("burst"), field + ".burst", algorithm.refusesBurst());
        }
        if (fields.containsKey("refill") && !algorithm.hasRefill()) {
            throw error(fields.get("refill"), field + ".refill", algorithm.refusesRefill());
        }
        Long burst = fields.containsKey("burst") ? whole(fields.get("burst"), field + ".burst", 1) : null;
        Refill refill = null;
        if (fields.containsKey("refill")) {
            String text = scalar(fields.get("refill"), field + ".refill");
            refill = parsed(fields.get("refill"), field + ".refill", () -> Refill.parse(text));
        }
        List<Limit> limits = new ArrayList<>();
        List<Node> limitNodes = list(required(fields, node, field, "limits"), field + ".limits");
        if (limitNodes.isEmpty()) {
            throw error(fields.get("limits"), field + ".limits", "at least one limit is needed");
        }
        for (int i = 0; i < limitNodes.size(); i++) {
            String where = field + ".limits[" + i + "]";
            String text = scalar(limitNodes.get(i), where);
            Limit limit = parsed(limitNodes.get(i), where, () -> Limit.parse(text));
            for (String option : List.of("burst", "refill")) {
                if (fields.containsKey(option) && Limit.givesOption(text, option)) { // one would replace the other
                    throw error(limitNodes.get(i), where, "\"" + text + "\" gives its own " + option + ", and the"
                            + " policy's " + option + " would replace it: give it in one place");
                }
            }
            if (refill != null) {
                limit = limit.withRefill(refill);
            }
            if (burst != null) {
                Limit unburst = limit;
                long b = burst;
                limit = parsed(fields.get("burst"), field + ".burst", () -> unburst.withBurst(b));
            }
            Limit alone = limit; // a limit's own problem (a burst its algorithm takes none of, too deep) at its line
            parsed(limitNodes.get(i), where, () -> Rule.of(algorithm, List.of(alone), Mode.REJECT, 0));
            int same = limits.indexOf(limit);
            if (same >= 0) { // twice the same limit decides as once: a slip, most likely for another one
                throw error(limitNodes.get(i), where, "the same limit as limits[" + same + "], " + limit);
            }
            limits.add(limit);
        }
        Cost cost = cost(fields, field);
        String modeText = fields.containsKey("mode") ? scalar(fields.get("mode"), field + ".mode") : "reject";
        boolean shadow = modeText.equals("shadow");
        Mode mode;
        switch (modeText) {
            case "reject", "shadow" -> mode = Mode.REJECT;
            case "delay" -> {
                mode = algorithm.delayMode();
                if (mode == Mode.DELAY && !algorithm.canDelay()) {
                    throw error(fields.get("mode"), field + ".mode", "delay mode is for token-bucket and gcra (and"
                            + " leaky-bucket, as a queue), not " + algorithm);
                }
            }
            // leaky-bucket's delay, under the name check, /v1/policies and simulate give it (a review found it
            // refused here, while those printed it)
            case "shaping" -> {
                if (algorithm != Algorithm.LEAKY_BUCKET) {
                    throw error(fields.get("mode"), field + ".mode", "shaping is leaky-bucket's queue; " + algorithm
                            + " delays with mode: delay");
                }
                mode = Mode.SHAPING;
            }
            default -> throw error(fields.get("mode"), field + ".mode",
                    "expected reject, delay or shadow (or shaping, leaky-bucket's delay), got \"" + modeText + "\"");
        }
        long maxDelay = 0;
        if (fields.containsKey("max_delay")) {
            // shaping too: a request whose turn in the queue is further off than max_delay is rejected instead
            if (mode != Mode.DELAY && mode != Mode.SHAPING) {
                throw error(fields.get("max_delay"), field + ".max_delay", "max_delay is for mode: delay (and "
                        + "leaky-bucket's shaping)");
            }
            // a queue's may be 0 (it lets a request in only when no turn is ahead of it), as simulate takes it
            maxDelay = mode == Mode.SHAPING ? duration(fields.get("max_delay"), field + ".max_delay")
                    : positiveDuration(fields.get("max_delay"), field + ".max_delay");
        } else if (mode == Mode.DELAY) {
            throw error(fields.containsKey("mode") ? fields.get("mode") : node, field + ".mode",
                    "mode: delay needs max_delay");
        } else if (mode == Mode.SHAPING) {
            maxDelay = Rule.NO_MAX_DELAY; // the queue's length its only bound
        }
        boolean skip = skipIfMissing(fields, field);
        Mode chosen = mode;
        long delay = maxDelay;
        // each limit is right alone (above), so what is left to refuse is the max delay's (too many refills)
        Node delayNode = fields.containsKey("max_delay") ? fields.get("max_delay") : node;
        Rule rule = parsed(delayNode, fields.containsKey("max_delay") ? field + ".max_delay" : field,
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
            throw error(fields.get("cost"), field + ".cost", "a cost of 0 charges nothing, so the policy would never"
                    + " limit a request: remove it, or use mode: shadow to watch a limit without enforcing it");
        }
        boolean never;
        try {
            never = rule != null ? rule.decide(null, 0, cost.fixed()).decision().never() : cost.fixed() > inFlight.amount();
        } catch (IllegalArgumentException e) { // past what the arithmetic holds
            never = true;
        }
        if (never) {
            throw error(fields.get("cost"), field + ".cost", "a cost of " + cost.fixed() + " is more than the policy's"
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
            parsed(limitNodes.get(i), field + ".limits[" + i + "]", () -> {
                RedisStore.checkExact(one);
                return one;
            });
        }
        if (maxDelay != null) { // the limits fit, so only the max delay can be beyond
            parsed(maxDelay, field + ".max_delay", () -> {
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
                throw error(nodes.get(i), where, part + " reads an Envoy descriptor: the policy needs match.domain and"
                        + " match.descriptor");
            }
            if (match.domain() != null && !(part instanceof KeyPart.Const)
                    && !(part instanceof KeyPart.DescriptorValue value
                    && match.descriptor().stream().anyMatch(entry -> entry.key().equals(value.key())))) {
                throw error(nodes.get(i), where, "an Envoy descriptor carries only its entries: expected descriptor:KEY"
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
            throw error(algorithm, field + ".algorithm", "Envoy does not tell the rate limit service when a request"
                    + " is over, so a policy of match.domain cannot count requests in flight");
        }
        if (fields.containsKey("mode") && scalar(fields.get("mode"), field + ".mode").equals("delay")) {
            throw error(fields.get("mode"), field + ".mode", "Envoy admits or refuses a request at once, so a policy of"
                    + " match.domain cannot delay it: use reject or shadow");
        }
        if (fields.containsKey("cost") && scalar(fields.get("cost"), field + ".cost").startsWith("header:")) {
            throw error(fields.get("cost"), field + ".cost", "a descriptor has no headers: its cost is its hits_addend"
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
        String text = scalar(fields.get("cost"), field + ".cost");
        if (text.startsWith("header:")) {
            String header = text.substring("header:".length());
            if (!KeyPart.NAME.matcher(header).matches()) {
                throw error(fields.get("cost"), field + ".cost", "bad header name \"" + header + "\"");
            }
            return new Cost(1, header);
        }
        return new Cost(whole(fields.get("cost"), field + ".cost", 0), null);
    }

    private boolean skipIfMissing(Map<String, Node> fields, String field) throws ConfigException {
        if (!fields.containsKey("skip_if_missing")) {
            return false;
        }
        String text = scalar(fields.get("skip_if_missing"), field + ".skip_if_missing");
        if (!text.equals("true") && !text.equals("false")) {
            throw error(fields.get("skip_if_missing"), field + ".skip_if_missing", "expected true or false, got \"" + text + "\"");
        }
        return text.equals("true");
    }

    /**
     * A concurrency policy: one limit {@code N/LEASE} ({@code 10/30s}: at most 10 in flight per key, a lease held
     * at most 30 s if its request never ends), mode reject or shadow.
     */
    private PolicyConfig concurrencyPolicy(Node node, Map<String, Node> fields, String field, String name,
                                           PolicyConfig.Match match, List<KeyPart> key) throws ConfigException {
        for (String rateOnly : List.of("burst", "refill", "max_delay")) {
            if (fields.containsKey(rateOnly)) {
                throw error(fields.get(rateOnly), field + "." + rateOnly, rateOnly + " is for rate limits, not concurrency");
            }
        }
        List<Node> limitNodes = list(required(fields, node, field, "limits"), field + ".limits");
        if (limitNodes.size() != 1) {
            throw error(fields.get("limits"), field + ".limits", "a concurrency policy has one limit N/LEASE, as in"
                    + " [10/30s]: at most 10 in flight per key, a lease held at most 30 s");
        }
        String text = scalar(limitNodes.get(0), field + ".limits[0]");
        Limit limit = parsed(limitNodes.get(0), field + ".limits[0]", () -> Limit.parse(text));
        if (!limit.equals(Limit.of(limit.amount(), limit.periodNanos()))) {
            throw error(limitNodes.get(0), field + ".limits[0]", "a concurrency limit has no burst or refill, got \"" + text + "\"");
        }
        if (limit.amount() > ConcurrencyLimiter.DEFAULT_MAX_PLACES) { // more could never be held: said, not capped
            throw error(limitNodes.get(0), field + ".limits[0]", "a concurrency policy holds at most "
                    + ConcurrencyLimiter.DEFAULT_MAX_PLACES + " places at once over all its keys, got \"" + text + "\"");
        }
        String mode = fields.containsKey("mode") ? scalar(fields.get("mode"), field + ".mode") : "reject";
        if (!mode.equals("reject") && !mode.equals("shadow")) {
            throw error(fields.get("mode"), field + ".mode", "a concurrency policy rejects or shadows, got \"" + mode + "\"");
        }
        Cost cost = cost(fields, field);
        fits(cost, null, limit, fields, field);
        return new PolicyConfig(name, match, key, null, limit, cost.fixed(), cost.header(), mode.equals("shadow"),
                skipIfMissing(fields, field));
    }

    private PolicyConfig.Match match(Node node, String field) throws ConfigException {
        Map<String, Node> fields = fields(node, field + ".", MATCH);
        PathGlob path = null;
        if (fields.containsKey("path")) {
            String glob = scalar(fields.get("path"), field + ".path");
            path = parsed(fields.get("path"), field + ".path", () -> {
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
            List<Node> items = list(fields.get("methods"), field + ".methods");
            if (items.isEmpty()) {
                throw error(fields.get("methods"), field + ".methods", "an empty list matches no request; list the"
                        + " methods, or leave methods out to match every one");
            }
            for (int i = 0; i < items.size(); i++) {
                String method = scalar(items.get(i), field + ".methods[" + i + "]");
                if (!METHOD.matcher(method).matches()) {
                    throw error(items.get(i), field + ".methods[" + i + "]",
                            "expected an HTTP method in capitals such as GET, got \"" + method + "\"");
                }
                methods.add(method);
            }
            methods = List.copyOf(methods);
        }
        String host = fields.containsKey("host") ? scalar(fields.get("host"), field + ".host").toLowerCase(Locale.ROOT) : null;
        if (host != null && host.isEmpty()) {
            throw error(fields.get("host"), field + ".host", "must not be empty; leave host out to match every host");
        }
        if (host != null && !host.chars().allMatch(c -> c > ' ' && c != 0x7F && "*/@?#\\".indexOf(c) < 0)) {
            // a Host header carries none of these, and none matches a pattern: *.example.com matched no host, and its
            // policy limited nothing without a word (a review found it)
            throw error(fields.get("host"), field + ".host", "\"" + host + "\" is no host a Host header carries (no"
                    + " wildcards, spaces, / @ ? #): one host is matched whole, in any case");
        }
        if (host != null && !host.startsWith("[") && host.indexOf(':') != host.lastIndexOf(':')) {
            throw error(fields.get("host"), field + ".host", "an IPv6 address is written in brackets, as a Host header"
                    + " carries it: \"[" + host + "]\"");
        }
        if (host != null && !host.equals(ClientRequest.hostWithoutPort(host))) {
            // requests are matched on their Host without its port or a final dot, so a host with one never matches
            throw error(fields.get("host"), field + ".host", "a host is matched without its "
                    + (host.endsWith(".") ? "final dot" : "port") + ": write \"" + ClientRequest.hostWithoutPort(host)
                    + "\", not \"" + host + "\"");
        }
        Map<String, String> headers = fields.containsKey("headers") ? headers(fields.get("headers"), field + ".headers")
                : null;
        if (!fields.containsKey("domain") && !fields.containsKey("descriptor")) {
            return new PolicyConfig.Match(path, methods, host, headers);
        }
        for (String http : List.of("path", "methods", "host", "headers")) {
            if (fields.containsKey(http)) {
                throw error(fields.get(http), field + "." + http, "a policy of match.domain decides descriptors from Envoy,"
                        + " which have no " + http + "; match HTTP requests in a policy of their own");
            }
        }
        String domain = scalar(required(fields, node, field, "domain"), field + ".domain");
        if (domain.isEmpty()) {
            throw error(fields.get("domain"), field + ".domain", "must not be empty");
        }
        List<Node> items = list(required(fields, node, field, "descriptor"), field + ".descriptor");
        if (items.isEmpty()) {
            throw error(fields.get("descriptor"), field + ".descriptor", "at least one entry is needed, KEY or KEY=VALUE");
        }
        List<Descriptor.Entry> descriptor = new ArrayList<>();
        for (int i = 0; i < items.size(); i++) {
            String text = scalar(items.get(i), field + ".descriptor[" + i + "]");
            int equals = text.indexOf('=');
            String entryKey = equals < 0 ? text : text.substring(0, equals);
            if (!KeyPart.DescriptorValue.KEY.matcher(entryKey).matches()) {
                throw error(items.get(i), field + ".descriptor[" + i + "]", "expected KEY or KEY=VALUE (a KEY without"
                        + " spaces), got \"" + text + "\"");
            }
            for (int j = 0; j < descriptor.size(); j++) {
                if (descriptor.get(j).key().equals(entryKey)) { // as an Envoy file's path is refused (a review found it)
                    throw error(items.get(i), field + ".descriptor[" + i + "]", "key \"" + entryKey + "\" is in the"
                            + " pattern already, at descriptor[" + j + "]; Sluice counts a descriptor by the values of"
                            + " its keys, so each key once");
                }
            }
            descriptor.add(new Descriptor.Entry(entryKey, equals < 0 ? null : text.substring(equals + 1)));
        }
        return new PolicyConfig.Match(null, null, null, domain, List.copyOf(descriptor));
    }

    private String store(Node node) throws ConfigException {
        String store = scalar(node, "store");
        if (store.equals("memory")) {
            return store;
        }
        String scheme = java.util.stream.Stream.of("redis://", "rediss://", "redis-cluster://", "rediss-cluster://",
                "redis-sentinel://", "rediss-sentinel://").filter(store::startsWith).findFirst().orElse(null);
        String nodes = scheme == null ? null : store.substring(scheme.length());
        boolean sentinel = scheme != null && scheme.endsWith("-sentinel://");
        if (sentinel) {
            // the sentinels' nodes before the database and the primary's #name: the store's own check reads them
            nodes = nodes.replaceFirst("#[^#]*$", "");
            nodes = nodes.substring(0, nodes.lastIndexOf('@') + 1) + nodes.substring(nodes.lastIndexOf('@') + 1)
                    .replaceFirst("/\\d*$", "");
        }
        if (nodes != null) {
            boolean cluster = scheme.endsWith("-cluster://") || sentinel;
            for (String address : cluster ? nodes.split(",", -1) : new String[] {nodes}) {
                // each node may carry credentials, everything up to its last @ (a review found a Cluster's refused,
                // its first node named as the bad one); the port's range is the store's own check, below
                String hostPort = (cluster ? address.trim() : address.replaceFirst("/\\d+$", ""))
                        .replaceFirst("^.*@", "");
                if (!cluster && hostPort.contains(",")) {
                    break; // several nodes: the store's own check below says what is wrong
                }
                if (!hostPort.matches("[A-Za-z0-9.\\-]+(:\\d+)?|\\[[0-9A-Fa-f:.]+](:\\d+)?")) {
                    throw error(node, "store", "bad Redis address \"" + RedisStore.shown(address) + "\" in \""
                            + RedisStore.shown(store) + "\": expected "
                            + (cluster ? "host:port,host:port" : "host:port[/db]"));
                }
            }
            try {
                RedisStore.checkAddress(store); // as the store will read it: a password it cannot read, say
            } catch (IllegalArgumentException e) {
                throw error(node, "store", e.getMessage());
            }
            return store;
        }
        throw error(node, "store", "expected memory, redis://host:port[/db], redis-cluster://h1:p1,h2:p2 or"
                + " redis-sentinel://h1:p1,h2:p2[/db]#primary (rediss://, rediss-cluster://, rediss-sentinel:// over"
                + " TLS), got \""
                + RedisStore.shown(store) + "\"");
    }

    private String cidr(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        parsed(node, field, () -> TrustedProxies.of(List.of(text)));
        return text;
    }

    // ------------------------------------------------------------------------------------------- nodes

    Map<String, Node> fields(Node node, String prefix, Set<String> known) throws ConfigException {
        if (!(node instanceof MappingNode)) {
            throw error(node, prefix.isEmpty() ? "(top)" : prefix.substring(0, prefix.length() - 1), "expected a mapping");
        }
        Map<String, Node> fields = new LinkedHashMap<>();
        for (NodeTuple tuple : ((MappingNode) node).getValue()) {
            String name = tuple.getKeyNode() instanceof ScalarNode scalar ? scalar.getValue() : "?";
            if (!known.contains(name)) {
                throw error(tuple.getKeyNode(), prefix + name, "unknown field \"" + name + "\"; expected one of "
                        + known.stream().sorted().toList());
            }
            if (fields.put(name, tuple.getValueNode()) != null) {
                throw error(tuple.getKeyNode(), prefix + name, "given twice");
            }
        }
        return fields;
    }

    /** The value of the field {@code name} of the mapping {@code node}, or {@code node} itself without one. */
    private static Node valueOf(Node node, String name) {
        if (node instanceof MappingNode mapping) {
            for (NodeTuple tuple : mapping.getValue()) {
                if (tuple.getKeyNode() instanceof ScalarNode key && key.getValue().equals(name)) {
                    return tuple.getValueNode();
                }
            }
        }
        return node;
    }

    Node required(Map<String, Node> fields, Node parent, String field, String name) throws ConfigException {
        Node node = fields.get(name);
        if (node == null) {
            throw error(parent, field + "." + name, "missing");
        }
        return node;
    }

    List<Node> list(Node node, String field) throws ConfigException {
        if (!(node instanceof SequenceNode)) {
            throw error(node, field, "expected a list");
        }
        return ((SequenceNode) node).getValue();
    }

    String scalar(Node node, String field) throws ConfigException {
        if (!(node instanceof ScalarNode)) {
            throw error(node, field, "expected a single value");
        }
        String value = ((ScalarNode) node).getValue();
        if (node.getTag().equals(Tag.NULL) && !value.isEmpty()) {
            // ~ and null are YAML's no value, which Sluice took for the text "~" or "null": a host: ~ matched no
            // request, silently (a review found it); an empty value is told at each field as before
            throw error(node, field, "\"" + value + "\" is YAML's null: leave the field out, or give it a value");
        }
        return value;
    }

    long whole(Node node, String field, long least) throws ConfigException {
        String text = scalar(node, field);
        if (text.matches("0[0-9]+")) { // 010: 8 to a YAML 1.1 reader (Envoy's service among them), 10 to others
            throw error(node, field, "\"" + text + "\" starts with a 0, which YAML 1.1 reads as octal: write it"
                    + " without the 0");
        }
        try {
            // ASCII digits: Long.parseLong also reads "٥" (and "+5", which YAML writes as 5 anyway)
            long value = text.matches("-?[0-9]+") ? Long.parseLong(text) : least - 1;
            if (value >= least) {
                return value;
            }
        } catch (NumberFormatException e) {
            // falls through to the message
        }
        throw error(node, field, "expected a whole number >= " + least + ", got \"" + text + "\"");
    }

    private long duration(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        return parsed(node, field, () -> DurationFormat.parseNanos(text));
    }

    private long positiveDuration(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        long nanos = parsed(node, field, () -> DurationFormat.parseNanos(text));
        if (nanos <= 0) {
            throw error(node, field, "must be > 0, got \"" + text + "\"");
        }
        return nanos;
    }

    @FunctionalInterface
    private interface Parse<T> {
        T get();
    }

    private <T> T parsed(Node node, String field, Parse<T> parse) throws ConfigException {
        try {
            return parse.get();
        } catch (IllegalArgumentException e) {
            throw error(node, field, e.getMessage());
        }
    }

    static int line(Node node) {
        return node.getStartMark().getLine() + 1;
    }

    ConfigException error(Node node, String field, String message) {
        return new ConfigException(at(node) + ": " + field + ": " + message);
    }

    /** Where {@code node} stands: {@code file:line}. */
    String at(Node node) {
        return file + ":" + line(node);
    }

    String file() {
        return file;
    }

}
