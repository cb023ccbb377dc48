package dev.sluice.server.config;

import dev.sluice.ConcurrencyLimiter;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.request.TrustedProxies;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.InMemoryStore;
import org.yaml.snakeyaml.nodes.Node;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads {@code sluice.yaml} and checks every field, so that a bad file is refused whole, with a message that
 * names the file, the line and the field: {@code sluice.yaml:14: policies[1].limits[0]: bad limit "10/0s": ...}.
 *
 * <p>The YAML is read as a tree of nodes that remember where they stood in the file ({@link YamlNodes}), not bound
 * to classes: binding would lose the lines. This class reads the file's top level (the store and its settings, the
 * answers, the headers, the Envoy files); each policy is {@link PolicyReader}'s.
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

    private final String file;
    /** The file's YAML, and every check of a node's shape, with messages that name the file and line. */
    private final YamlNodes yaml;
    /** The checks of each policy, and of what policies say of one another (replaces). */
    private final PolicyReader policyReader;

    private ConfigLoader(String file) {
        this.file = file;
        this.yaml = new YamlNodes(file);
        this.policyReader = new PolicyReader(yaml);
    }

    /** Reads and checks {@code path}. */
    public static ServerConfig load(Path path) throws ConfigException {
        return parse(path.toString(), TextFile.read(path));
    }

    /** Checks {@code text}, read from {@code file} (named in messages). */
    public static ServerConfig parse(String file, String text) throws ConfigException {
        return new ConfigLoader(file).config(text);
    }

    private ServerConfig config(String text) throws ConfigException {
        Node root = yaml.compose(text);
        if (root == null) {
            throw new ConfigException(file + ":1: the file is empty; it needs at least policies:");
        }
        Map<String, Node> top = yaml.fields(root, "", TOP);
        String store = top.containsKey("store") ? store(top.get("store")) : ServerConfig.MEMORY;
        FailurePolicy onFailure = FailurePolicy.OPEN;
        if (top.containsKey("on_store_failure")) {
            onFailure = yaml.choice(top.get("on_store_failure"), "on_store_failure", "open", "closed").equals("open")
                    ? FailurePolicy.OPEN : FailurePolicy.CLOSED;
        }
        long timeout = top.containsKey("store_timeout")
                ? yaml.positiveDuration(top.get("store_timeout"), "store_timeout") : 50_000_000L;
        if (timeout > MOST_STORE_TIMEOUT) { // the Redis store's bound, told at its line (a review found it "cannot connect")
            throw yaml.error(top.get("store_timeout"), "store_timeout", "at most 1d (a decision waits that long at most),"
                    + " got \"" + yaml.scalar(top.get("store_timeout"), "store_timeout") + "\"");
        }
        if (timeout < 1_000_000L) { // a review found 1ns taken: every decision the failure policy's, and not a word
            throw yaml.error(top.get("store_timeout"), "store_timeout", "at least 1ms (below it Redis's answers would come"
                    + " too late, and every decision would be the failure policy's), got \""
                    + yaml.scalar(top.get("store_timeout"), "store_timeout") + "\"");
        }
        Path trust = null;
        if (top.containsKey("store_trust")) {
            Node node = top.get("store_trust");
            if (!RedisStore.speaksTls(store)) {
                throw yaml.error(node, "store_trust", "the certificates a TLS store trusts; the store is not one (rediss://,"
                        + " rediss-cluster:// or rediss-sentinel://), got " + RedisStore.shown(store));
            }
            String path = yaml.scalar(node, "store_trust");
            try {
                trust = base().resolve(path);
                RedisStore.checkTrust(trust);
            } catch (InvalidPathException e) {
                throw yaml.error(node, "store_trust", "\"" + path + "\" is not a path: " + e.getReason());
            } catch (IllegalArgumentException e) {
                throw yaml.error(node, "store_trust", e.getMessage());
            }
        }
        ServerConfig.StorePassword password = storePassword(top, store);
        boolean inBackground = false;
        if (top.containsKey("store_connect")) {
            Node node = top.get("store_connect");
            inBackground = yaml.choice(node, "store_connect", "now", "background").equals("background");
            if (inBackground && ServerConfig.inMemory(store)) {
                throw yaml.error(node, "store_connect", "the in-memory store has nothing to connect to");
            }
            try {
                if (inBackground) {
                    RedisStore.checkConnectInBackground(store);
                }
            } catch (IllegalArgumentException e) {
                throw yaml.error(node, "store_connect", e.getMessage());
            }
        }
        long maxKeys = top.containsKey("max_keys") ? maxKeys(top.get("max_keys"), "max_keys", store)
                : InMemoryStore.DEFAULT_MAX_KEYS;
        boolean keysShown = false;
        if (top.containsKey("dashboard_keys")) {
            String value = yaml.scalar(top.get("dashboard_keys"), "dashboard_keys");
            if (!value.equals("masked") && !value.equals("shown")) {
                throw yaml.error(top.get("dashboard_keys"), "dashboard_keys", "expected masked (the default: a key's"
                        + " headers, cookies, query parameters, users and descriptor values masked) or shown, got \""
                        + value + "\"");
            }
            keysShown = value.equals("shown");
        }
        List<String> proxies = new ArrayList<>();
        if (top.containsKey("trusted_proxies")) {
            List<Node> items = yaml.list(top.get("trusted_proxies"), "trusted_proxies");
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
            throw new ConfigException(file + ":" + YamlNodes.line(root) + ": policies: missing; at least one policy is needed");
        }
        List<Node> items = top.containsKey("policies") ? yaml.list(top.get("policies"), "policies") : List.of();
        if (items.isEmpty() && !top.containsKey("envoy_configs")) {
            throw yaml.error(top.get("policies"), "policies", "at least one policy is needed");
        }
        PolicyConfig.Rejection rejection = new PolicyConfig.Rejection(top.containsKey("reject_status")
                ? rejectStatus(top.get("reject_status"), "reject_status") : PolicyConfig.DEFAULT_REJECT_STATUS,
                top.containsKey("reject_body") ? rejectBody(top.get("reject_body"), "reject_body") : null);
        List<PolicyConfig> policies = new ArrayList<>();
        Map<String, Integer> names = new HashMap<>();
        long allKeys = maxKeys; // the keys of every in-memory store: the shared one's and the policies' own
        for (int i = 0; i < items.size(); i++) {
            PolicyConfig policy = policyReader.policy(items.get(i), "policies[" + i + "]", !ServerConfig.inMemory(store));
            Node status = YamlNodes.valueOf(items.get(i), "reject_status");
            Node body = YamlNodes.valueOf(items.get(i), "reject_body");
            for (Node own : new Node[] {status, body}) {
                if (own != items.get(i) && policy.match().domain() != null) {
                    throw yaml.error(own, "policies[" + i + "]." + (own == status ? "reject_status" : "reject_body"), "is for"
                            + " HTTP requests; Envoy answers a descriptor over its limit as its rate limit filter is"
                            + " told (rate_limited_status)");
                }
            }
            if (policy.match().domain() == null) {
                policy = policy.withRejection(new PolicyConfig.Rejection(status != items.get(i)
                        ? rejectStatus(status, "policies[" + i + "].reject_status") : rejection.status(),
                        body != items.get(i) ? rejectBody(body, "policies[" + i + "].reject_body") : rejection.body()));
            }
            Node most = YamlNodes.valueOf(items.get(i), "max_keys");
            if (most != items.get(i)) {
                if (policy.inFlight() != null) {
                    throw yaml.error(most, "policies[" + i + "].max_keys", "is for rate policies; a concurrency policy"
                            + " holds its own places, at most " + dev.sluice.ConcurrencyLimiter.DEFAULT_MAX_PLACES
                            + " leases at once");
                }
                String field = "policies[" + i + "].max_keys";
                policy = policy.withMaxKeys(maxKeys(most, field, store));
                if (policy.name().equals(SHARED_POOL)) {
                    // its pool would be the shared store's in sluice_store_keys{pool} (a review found it taken over)
                    throw yaml.error(most, field, "a policy named " + SHARED_POOL + " cannot have a store of its own:"
                            + " sluice_store_keys{pool=\"" + SHARED_POOL + "\"} is the store the policies share;"
                            + " rename the policy");
                }
                allKeys += policy.maxKeys();
                if (allKeys > MOST_KEYS) {
                    throw yaml.error(most, field, "the stores together hold at most " + MOST_KEYS + " keys (about 100"
                            + " bytes of heap a key), and max_keys " + maxKeys + " and the policies' own so far come to "
                            + allKeys);
                }
            }
            // told at the field's own line, wherever it stands in the policy (a review found them at the first)
            Integer first = names.putIfAbsent(policy.name(), YamlNodes.line(YamlNodes.valueOf(items.get(i), "name")));
            if (first != null) {
                throw yaml.error(YamlNodes.valueOf(items.get(i), "name"), "policies[" + i + "].name", "duplicate policy name \""
                        + policy.name() + "\" (first at line " + first + ")");
            }
            if (policy.inFlight() != null && !ServerConfig.inMemory(store)) {
                throw yaml.error(YamlNodes.valueOf(items.get(i), "algorithm"), "policies[" + i + "].algorithm", "concurrency is counted in the memory of each server,"
                        + " so servers sharing " + RedisStore.shown(store) + " would each count their own; use store: memory");
            }
            policies.add(policy);
        }
        policies = policyReader.withReplaces(items, policies);
        ServerConfig.Envoy envoy = ServerConfig.Envoy.NONE;
        boolean mergeDomains = false;
        if (top.containsKey("envoy_merge_domains")) {
            boolean merge = yaml.flag(top.get("envoy_merge_domains"), "envoy_merge_domains");
            if (!top.containsKey("envoy_configs")) {
                throw yaml.error(top.get("envoy_merge_domains"), "envoy_merge_domains", "it is for the files of"
                        + " envoy_configs, and there are none");
            }
            mergeDomains = merge;
        }
        if (top.containsKey("envoy_configs")) {
            EnvoyConfigFiles read = new EnvoyConfigFiles(names, file, !ServerConfig.inMemory(store), mergeDomains);
            List<Node> paths = yaml.list(top.get("envoy_configs"), "envoy_configs");
            if (paths.isEmpty()) {
                throw yaml.error(top.get("envoy_configs"), "envoy_configs", "at least one file or directory is needed");
            }
            for (int i = 0; i < paths.size(); i++) {
                String where = "envoy_configs[" + i + "]";
                String path = yaml.scalar(paths.get(i), where);
                Path resolved;
                try {
                    if (path.isEmpty()) { // would be the directory of this very file
                        throw new InvalidPathException(path, "empty; name a file or directory");
                    }
                    resolved = base().resolve(path);
                } catch (InvalidPathException e) {
                    throw new ConfigException(yaml.error(paths.get(i), where, "\"" + path.replace("\u0000", "\\0")
                            + "\" is not a path: " + e.getReason()).getMessage(), read.files());
                }
                String problem;
                try {
                    problem = read.read(resolved);
                } catch (ConfigException e) {
                    throw new ConfigException(e.getMessage(), read.files());
                }
                if (problem != null) {
                    throw new ConfigException(yaml.error(paths.get(i), where, problem).getMessage(), read.files());
                }
            }
            policies.addAll(read.policies());
            // files that give no limit at all (only unlimited descriptors, an empty directory) are taken, as Envoy's
            // service takes them: calls are then OK; refused, a reload that set every limit unlimited, to switch
            // limits off, kept the old ones in force (a review compared the two)
            envoy = read.envoy();
        }
        return new ServerConfig(store, onFailure, timeout, maxKeys, List.copyOf(proxies), headers, envoyHeaders,
                List.copyOf(policies), envoy, top.containsKey("store") ? YamlNodes.line(top.get("store")) : 0, trust,
                inBackground, password, keysShown);
    }

    /**
     * A {@code max_keys}: the most keys an in-memory store holds, the one every policy shares or a policy's own
     * (nginx's zone); Redis has no such bound.
     */
    private long maxKeys(Node node, String field, String store) throws ConfigException {
        if (!ServerConfig.inMemory(store)) {
            throw yaml.error(node, field, "bounds the in-memory store only; Redis keeps keys until their TTL, bounded"
                    + " by its own maxmemory");
        }
        long most = yaml.whole(node, field, 1);
        if (most > MOST_KEYS) {
            throw yaml.error(node, field, "at most " + MOST_KEYS + " (about 100 bytes of heap a key), got " + most);
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
            throw yaml.error(variable, "store_password_env", "the password is given by store_password_file already (line "
                    + YamlNodes.line(file) + "); give one of the two");
        }
        if (ServerConfig.inMemory(store)) {
            throw yaml.error(node, field, "the password of a Redis store; the store is memory");
        }
        try {
            if (RedisStore.hasPassword(store)) {
                throw yaml.error(node, field, "the store's address has a password of its own (" + RedisStore.shown(store)
                        + "); give it once");
            }
        } catch (IllegalArgumentException e) {
            throw yaml.error(top.get("store"), "store", e.getMessage());
        }
        String name = yaml.scalar(node, field);
        String value;
        Path path = null;
        if (file != null) {
            try {
                path = base().resolve(name);
            } catch (InvalidPathException e) {
                throw yaml.error(node, field, "\"" + name + "\" is not a path: " + e.getReason());
            }
            try {
                value = TextFile.read(path); // as the watch reads it: bounded, strict UTF-8
            } catch (ConfigException e) {
                throw yaml.error(node, field, e.getMessage());
            }
            value = value.endsWith("\r\n") ? value.substring(0, value.length() - 2)
                    : value.endsWith("\n") ? value.substring(0, value.length() - 1) : value;
            if (value.isEmpty()) {
                throw yaml.error(node, field, path + ": holds no password (the file is empty)");
            }
            if (value.indexOf('\n') >= 0) {
                throw yaml.error(node, field, path + ": holds more than one line; a password is one");
            }
        } else {
            if (!name.matches("[A-Za-z_][A-Za-z0-9_]*")) {
                throw yaml.error(node, field, "expected the name of an environment variable, such as REDIS_PASSWORD, got \""
                        + name + "\"");
            }
            value = System.getenv(name);
            if (value == null || value.isEmpty()) {
                throw yaml.error(node, field, "the environment variable " + name + " is " + (value == null ? "not set"
                        : "empty"));
            }
        }
        return new ServerConfig.StorePassword(path, file != null ? null : name, value);
    }

    /**
     * The status of a request a policy rejects, as nginx's {@code limit_req_status}: an error, a client's or the
     * server's, so that no client takes a rejection for an answer.
     */
    private int rejectStatus(Node node, String field) throws ConfigException {
        String text = yaml.scalar(node, field);
        if (!text.matches("[45][0-9][0-9]")) {
            throw yaml.error(node, field, "expected an HTTP status from 400 to 599, such as 429 (the default) or 503"
                    + " (nginx's), got \"" + text + "\"");
        }
        return Integer.parseInt(text);
    }

    /**
     * The body of a rejection, as Kong's {@code error_message} lets it be said: a JSON object, written in the file as
     * its text, sent as it is ({@code application/json}); the wait is in {@code Retry-After}.
     */
    private String rejectBody(Node node, String field) throws ConfigException {
        String text = yaml.scalar(node, field);
        try {
            com.fasterxml.jackson.databind.JsonNode read = StrictJson.READER.readTree(text);
            if (read == null || !read.isObject()) {
                throw yaml.error(node, field, "expected a JSON object, such as '{\"message\": \"API rate limit exceeded\"}',"
                        + " got \"" + text + "\"");
            }
            return read.toString();
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw yaml.error(node, field, "not JSON: " + e.getOriginalMessage() + "; expected a JSON object, such as"
                    + " '{\"message\": \"API rate limit exceeded\"}'");
        }
    }

    /** The sets of response headers {@code node}, a list of {@code ietf} and {@code legacy}, names. */
    private Set<ServerConfig.HeaderSet> headerSets(Node node, String field) throws ConfigException {
        Set<ServerConfig.HeaderSet> sets = EnumSet.noneOf(ServerConfig.HeaderSet.class);
        List<Node> items = yaml.list(node, field);
        for (int i = 0; i < items.size(); i++) {
            sets.add(yaml.choice(items.get(i), field + "[" + i + "]", "ietf", "legacy").equals("ietf")
                    ? ServerConfig.HeaderSet.IETF : ServerConfig.HeaderSet.LEGACY);
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

    private String store(Node node) throws ConfigException {
        String store = yaml.scalar(node, "store");
        if (ServerConfig.inMemory(store)) {
            return store;
        }
        String scheme = java.util.stream.Stream.of("redis://", "rediss://", "redis-cluster://", "rediss-cluster://",
                "redis-sentinel://", "rediss-sentinel://").filter(store::startsWith).findFirst().orElse(null);
        String nodes = scheme == null ? null : store.substring(scheme.length());
        boolean sentinel = scheme != null && scheme.endsWith("-sentinel://");
        if (nodes != null && RedisStore.passwordInDoubt(store)) {
            // a piece of a password that could be read as a node or a primary's name: refused by the store's check,
            // which quotes none of it (the diff review found 3!k of :Xy@3!k,9@h1:7000 quoted below, as a bad host)
            return checkedByTheStore(node, store);
        }
        if (sentinel) {
            // the sentinels: after the credentials (everything to the last @: a piece of a password is never taken
            // for a node and quoted, as the diff review found b_c of :a@b_c,d@h1:26379), before the database and the
            // primary's #name; the store's own check reads them again
            nodes = nodes.replaceFirst("#[^#]*$", "");
            nodes = nodes.substring(nodes.lastIndexOf('@') + 1).replaceFirst("/\\d*$", "");
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
                    // a node, its credentials hidden: no part of a password is one, once those that may be are refused
                    throw yaml.error(node, "store", "bad Redis address \"" + RedisStore.shown(address) + "\" in \""
                            + RedisStore.shown(store) + "\": expected " + (cluster ? "host:port,host:port"
                            : "host:port[/db]"));
                }
            }
            return checkedByTheStore(node, store);
        }
        throw yaml.error(node, "store", "expected memory, redis://host:port[/db], redis-cluster://h1:p1,h2:p2 or"
                + " redis-sentinel://h1:p1,h2:p2[/db]#primary (rediss://, rediss-cluster://, rediss-sentinel:// over"
                + " TLS), got \""
                + RedisStore.shown(store) + "\"");
    }

    /** {@code store}, checked as the store will read it (a password it cannot read, say), at {@code node}'s line. */
    private String checkedByTheStore(Node node, String store) throws ConfigException {
        try {
            RedisStore.checkAddress(store);
        } catch (IllegalArgumentException e) {
            throw yaml.error(node, "store", e.getMessage());
        }
        return store;
    }

    private String cidr(Node node, String field) throws ConfigException {
        String text = yaml.scalar(node, field);
        yaml.parsed(node, field, () -> TrustedProxies.of(List.of(text)));
        return text;
    }
}
