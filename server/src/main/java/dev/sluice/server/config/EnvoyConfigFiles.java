package dev.sluice.server.config;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.algorithm.Rule;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.KeyPart;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.Tag;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Envoy's own rate limit configuration files, as its rate limit service reads them (one {@code domain} a file, a tree
 * of {@code descriptors}), read into Sluice's policies, so that a service configured for Envoy's can move to Sluice
 * with its files unchanged ({@code envoy_configs} in {@code sluice.yaml}; docs/envoy.md).
 *
 * <p>Each node of the tree that has a {@code rate_limit} becomes one policy: its {@code match.descriptor} is the path
 * of keys and values from the root down to it, its key every entry of that path ({@code descriptor:KEY}), so each
 * value a node leaves open is counted on its own as in Envoy's service; its algorithm is {@code fixed-window}, the
 * windows aligned to the epoch as Envoy's are, of one unit ({@code second} … {@code year}: a month is 30 days and a
 * year 365, as Envoy counts them); {@code shadow_mode} makes it a shadow policy, {@code share_threshold} (on a
 * wildcard) one counter for every value the wildcard takes. Every node, limited or not, is a pattern of the walk
 * ({@link Descriptor#walk}), in file order; one with {@code unlimited: true} or without {@code rate_limit} decides
 * nothing. A limit's name is {@code rate_limit.name} when given, else the path as Envoy names it in its statistics
 * ({@code edge.remote_address}, {@code edge.generic_key_trial.user}), with any character a policy name cannot hold
 * made {@code _} and a suffix when the name is taken. {@code replaces} is kept by pattern, since an unlimited limit
 * replaces too, and only limits with a name given can be replaced, as in Envoy's service.
 *
 * <p>What Envoy's service would refuse is refused here too, and so is what Sluice cannot count the same way (a limit
 * of 0, one key twice on a path), each with the file, the line and the field.
 */
final class EnvoyConfigFiles {
    private static final Set<String> ROOT = Set.of("domain", "descriptors");
    private static final Set<String> NODE = Set.of("key", "value", "rate_limit", "descriptors", "shadow_mode",
            "detailed_metric", "value_to_metric", "share_threshold");
    /** What YAML 1.1 (the YAML of Envoy's service) reads as true, and as false. */
    private static final Set<String> TRUE = Set.of("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON");
    private static final Set<String> FALSE = Set.of("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF");
    private static final Set<String> RATE_LIMIT = Set.of("unit", "requests_per_unit", "unlimited", "name", "replaces");
    private static final Set<String> REPLACES = Set.of("name");
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]*");
    private static final Pattern NOT_IN_NAME = Pattern.compile("[^A-Za-z0-9._-]");

    private final Map<String, Integer> sluiceNames;
    private final String sluiceFile;
    /** Whether the store is Redis, whose Lua arithmetic stays exact for periods under 2^53 ns (104.2 days) only: no year. */
    private final boolean onRedis;
    /** The names given (rate_limit.name), with where. */
    private final Map<String, String> names = new HashMap<>();
    /** How many limits made each name from their path: a name made twice, or given too, is made unique for all. */
    private final Map<String, Integer> madeCount = new HashMap<>();
    /** The limits whose names were made, by their index in {@link #policies}. */
    private final Map<Integer, String> madeAt = new HashMap<>();
    /** Whether files of one domain are merged (Envoy's {@code MERGE_DOMAIN_CONFIG}) rather than refused. */
    private final boolean mergeDomains;
    private final Map<String, String> domains = new HashMap<>();
    /** Each domain's top level, every entry with where it is: files merged into one domain share it. */
    private final Map<String, Map<String, String>> tops = new HashMap<>();
    private final List<PolicyConfig> policies = new ArrayList<>();
    private final List<PolicyConfig.Match> patterns = new ArrayList<>();
    private final Map<PolicyConfig.Match, List<String>> replaces = new LinkedHashMap<>();
    private final java.util.Set<String> replaceable = new java.util.HashSet<>();
    private final Map<PolicyConfig.Match, ServerConfig.Envoy.Blocked> blocked = new LinkedHashMap<>();
    private final java.util.Set<PolicyConfig.Match> unlimitedPatterns = new java.util.HashSet<>();
    private final Map<Path, String> files = new LinkedHashMap<>();

    /**
     * @param sluiceNames the names of the policies of {@code sluiceFile} and their lines, which no limit may take
     *                    (a name made from a path takes a suffix of its own instead, {@code edge.a.b-3f09c2})
     */
    EnvoyConfigFiles(Map<String, Integer> sluiceNames, String sluiceFile, boolean onRedis, boolean mergeDomains) {
        this.sluiceNames = sluiceNames;
        this.sluiceFile = sluiceFile;
        this.onRedis = onRedis;
        this.mergeDomains = mergeDomains;
    }

    /**
     * Reads {@code path}: a file, or every file under a directory, at any depth, in the order of their paths, as
     * Envoy's service reads its configuration directory; names that start with {@code .} are passed over (Envoy's
     * {@code RUNTIME_IGNOREDOTFILES}, which the {@code ..data} links of a Kubernetes ConfigMap volume need). A
     * problem with the path itself is returned, to be told where {@code sluice.yaml} names it; one inside a file is
     * thrown, naming that file.
     */
    String read(Path path) throws ConfigException {
        if (!Files.isDirectory(path)) {
            return readFile(path);
        }
        files.put(path, snapshot(path)); // watched from now on, whatever it holds
        List<Path> inside;
        try {
            inside = filesUnder(path);
        } catch (IOException e) {
            String where = e instanceof java.nio.file.FileSystemException fs && fs.getFile() != null
                    && !fs.getFile().equals(path.toString()) ? " (" + fs.getFile() + ")" : "";
            return "cannot list " + path + where + ": " + TextFile.reason(e);
        }
        // a directory that holds no file gives no limit, as in Envoy's service (a ConfigMap emptied, say), and is
        // watched for the files to come
        for (Path file : inside) {
            String problem = readFile(file);
            if (problem != null) {
                return problem;
            }
        }
        return null;
    }

    /**
     * The files under {@code directory}, at any depth, without those whose name (or a directory's) starts with '.'.
     * A dotted directory is not entered at all, and a directory that cannot be read is an {@link IOException}
     * naming it. A past bug a review found: {@code Files.walk} went into dotted directories, and threw an unchecked
     * exception for one it could not read (or a file gone while it walked: an editor's test file, the directory a
     * Kubernetes ConfigMap update removes), which came out as a stack trace at start and ended the reloads of a
     * running server for good.
     */
    private static List<Path> filesUnder(Path directory) throws IOException {
        List<Path> files = new ArrayList<>();
        Files.walkFileTree(directory, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attributes) {
                return !dir.equals(directory) && dotted(directory.relativize(dir)) ? FileVisitResult.SKIP_SUBTREE
                        : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) {
                if (!dotted(directory.relativize(file)) && Files.isRegularFile(file)) { // a link to a file too
                    files.add(file);
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException failure) throws IOException {
                if (!file.equals(directory) && (failure instanceof NoSuchFileException
                        || dotted(directory.relativize(file)))) {
                    // gone while this walked (the next look sees what is there), or a dotted directory that cannot
                    // be opened: a walk opens a directory before it asks whether to enter it
                    return FileVisitResult.CONTINUE;
                }
                throw failure;
            }
        });
        files.sort(null);
        return files;
    }

    private String readFile(Path file) throws ConfigException {
        String text;
        if (!Files.exists(file)) {
            files.put(file, MISSING); // watched, so that a reload sees it come
            return "no such file or directory: " + file;
        }
        try {
            text = TextFile.read(file);
        } catch (ConfigException e) {
            files.put(file, MISSING); // watched, so that a reload sees it readable
            return e.getMessage();
        }
        files.put(file, text);
        file(new YamlNodes(file.toString()), text);
        return null;
    }

    /** Whether a name along {@code path} starts with '.'. */
    private static boolean dotted(Path path) {
        for (Path name : path) {
            if (name.toString().startsWith(".")) {
                return true;
            }
        }
        return false;
    }

    /**
     * What {@code path} holds now, to compare with {@link ServerConfig.Envoy#files()}: a file's text, the files under a
     * directory, {@link #MISSING} when it is gone or cannot be read.
     */
    static String snapshot(Path path) {
        try {
            if (Files.isDirectory(path)) {
                return String.join("\n", filesUnder(path).stream().map(file -> path.relativize(file).toString()).toList());
            }
            return TextFile.read(path);
        } catch (IOException | ConfigException e) {
            return MISSING;
        }
    }

    /** What {@link #files()} holds for a path that names nothing. */
    static final String MISSING = "\u0000 no such file";

    /** What each file and directory held as it was read. */
    Map<Path, String> files() {
        return files;
    }

    /**
     * The policies of the files read, a made name that is taken (by a policy of sluice.yaml, a name given, or another
     * limit's made name) made unique for every limit that made it: its suffix is of its own domain and path, so
     * neither the order of the files nor an edit elsewhere hands one limit's name, and with it its metric series and
     * its counters, to another (a review found a count in file order, and then the first read keeping the plain name).
     */
    List<PolicyConfig> policies() {
        List<PolicyConfig> named = new ArrayList<>(policies);
        madeAt.forEach((at, made) -> {
            if (madeCount.get(made) > 1 || names.containsKey(made) || sluiceNames.containsKey(made)) {
                PolicyConfig policy = named.get(at);
                named.set(at, policy.named(unique(made, policy.match())));
            }
        });
        return named;
    }

    /** {@code made} and six hex digits of {@code pattern}'s domain and path. */
    private static String unique(String made, PolicyConfig.Match pattern) {
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        crc.update((pattern.domain() + "|" + pattern.descriptor()).getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return made + "-" + String.format("%08x", crc.getValue()).substring(0, 6);
    }

    ServerConfig.Envoy envoy() {
        Map<PolicyConfig.Match, List<String>> replaced = new LinkedHashMap<>();
        replaces.forEach((pattern, names) -> replaced.put(pattern, List.copyOf(names)));
        return new ServerConfig.Envoy(List.copyOf(patterns), Map.copyOf(replaced), Set.copyOf(replaceable),
                Map.copyOf(blocked), Set.copyOf(unlimitedPatterns), Set.copyOf(domains.keySet()), Map.copyOf(files));
    }

    private void file(YamlNodes nodes, String text) throws ConfigException {
        Node root = nodes.compose(text);
        if (root == null) {
            throw new ConfigException(nodes.file() + ":1: the file is empty; an Envoy rate limit configuration needs"
                    + " a domain and descriptors");
        }
        Map<String, Node> top = nodes.fields(root, "", ROOT);
        if (!top.containsKey("domain")) {
            throw nodes.error(root, "domain", "missing; an Envoy rate limit configuration names its domain");
        }
        String domain = nodes.scalar(top.get("domain"), "domain");
        if (domain.isEmpty()) {
            throw nodes.error(top.get("domain"), "domain", "must not be empty");
        }
        String first = domains.putIfAbsent(domain, nodes.at(top.get("domain")));
        if (first != null && !mergeDomains) {
            throw nodes.error(top.get("domain"), "domain", "domain \"" + domain + "\" is configured already, at " + first
                    + " (envoy_merge_domains: true merges the files of one domain, as Envoy's MERGE_DOMAIN_CONFIG does)");
        }
        if (top.containsKey("descriptors")) {
            descriptors(nodes, top.get("descriptors"), "descriptors", domain, List.of(), List.of(),
                    tops.computeIfAbsent(domain, merged -> new HashMap<>()));
        }
    }

    /**
     * The nodes of one level of the tree under {@code path}; {@code level} holds the entries the level has already,
     * with where each is (files merged into one domain share their top level, as in Envoy's service, where a node
     * of one file beside the same node of another is an error).
     */
    private void descriptors(YamlNodes nodes, Node list, String field, String domain, List<Descriptor.Entry> path,
                             List<Boolean> sharedPath, Map<String, String> level) throws ConfigException {
        List<Node> items = nodes.list(list, field);
        for (int i = 0; i < items.size(); i++) {
            Node node = items.get(i);
            String where = field + "[" + i + "]";
            Map<String, Node> fields = nodes.fields(node, where + ".", NODE);
            String key = nodes.scalar(nodes.required(fields, node, where, "key"), where + ".key");
            if (!KeyPart.DescriptorValue.KEY.matcher(key).matches()) {
                throw nodes.error(fields.get("key"), where + ".key", key.isEmpty() ? "must not be empty"
                        : "Sluice takes keys without white space or '=', got \"" + key + "\"");
            }
            // value: ~ (or null) is no value to Envoy's service, which reads its files as YAML: any value of the key
            String value = !fields.containsKey("value") || fields.get("value").getTag().equals(Tag.NULL) ? ""
                    : nodes.scalar(fields.get("value"), where + ".value");
            Descriptor.Entry entry = new Descriptor.Entry(key, value.isEmpty() ? null : value);
            String before = level.putIfAbsent(entry.toString(), nodes.at(node));
            if (before != null) {
                String inFile = nodes.file() + ":";
                throw nodes.error(node, where, "a second " + entry + " on this level (the first at "
                        + (before.startsWith(inFile) ? "line " + before.substring(inFile.length()) : before) + ")");
            }
            for (Descriptor.Entry above : path) {
                if (above.key().equals(key)) {
                    throw nodes.error(fields.get("key"), where + ".key", "key \"" + key + "\" is on the path above"
                            + " already; Sluice counts a descriptor by the values of its keys, so each key once");
                }
            }
            List<Descriptor.Entry> here = new ArrayList<>(path);
            here.add(entry);
            here = List.copyOf(here);
            boolean shadow = flag(nodes, fields, "shadow_mode", where);
            // Envoy's statistics per value: Sluice's metrics are per policy
            flag(nodes, fields, "detailed_metric", where);
            flag(nodes, fields, "value_to_metric", where);
            boolean shared = flag(nodes, fields, "share_threshold", where);
            if (shared && !entry.wildcard()) {
                throw nodes.error(fields.get("share_threshold"), where + ".share_threshold", "share_threshold is for a"
                        + " value that ends in *, whose values then share one counter");
            }
            // a shared wildcard shares the counters of the limits below it too, as in Envoy's service, which applies the
            // share_threshold of every wildcard a walk went through to the limit it ends on (a review found only a
            // limit beside the wildcard sharing)
            List<Boolean> sharedHere = new ArrayList<>(sharedPath);
            sharedHere.add(shared);
            sharedHere = List.copyOf(sharedHere);
            PolicyConfig.Match pattern = new PolicyConfig.Match(null, null, null, domain, here);
            patterns.add(pattern); // in file order: the first wildcard that takes a value is the one the walk follows
            // rate_limit: left empty (YAML's null) is no limit, as in Envoy's service (a review found it refused)
            if (fields.containsKey("rate_limit") && !fields.get("rate_limit").getTag().equals(org.yaml.snakeyaml.nodes.Tag.NULL)) {
                limit(nodes, fields.get("rate_limit"), where + ".rate_limit", pattern, shadow, sharedHere);
            }
            if (fields.containsKey("descriptors")) {
                descriptors(nodes, fields.get("descriptors"), where + ".descriptors", domain, here, sharedHere,
                        new HashMap<>());
            }
        }
    }

    /**
     * A node's {@code rate_limit}: a policy, unless {@code unlimited}; either way its {@code name} and what it
     * {@code replaces}, since an unlimited limit replaces others too.
     */
    private void limit(YamlNodes nodes, Node node, String field, PolicyConfig.Match pattern, boolean shadow,
                       List<Boolean> shared) throws ConfigException {
        Map<String, Node> fields = nodes.fields(node, field + ".", RATE_LIMIT);
        String given = null;
        if (fields.containsKey("name")) {
            given = nodes.scalar(fields.get("name"), field + ".name");
            if (!NAME.matcher(given).matches()) {
                throw nodes.error(fields.get("name"), field + ".name", "a Sluice policy name is letters, digits, '.', '_'"
                        + " or '-', got \"" + given + "\"");
            }
        }
        if (fields.containsKey("replaces")) {
            List<String> replaced = new ArrayList<>();
            List<Node> items = nodes.list(fields.get("replaces"), field + ".replaces");
            for (int i = 0; i < items.size(); i++) {
                String where = field + ".replaces[" + i + "]";
                Map<String, Node> item = nodes.fields(items.get(i), where + ".", REPLACES);
                String other = nodes.scalar(nodes.required(item, items.get(i), where, "name"), where + ".name");
                if (other.isEmpty()) {
                    throw nodes.error(item.get("name"), where + ".name", "must not be empty");
                }
                if (other.equals(given)) {
                    throw nodes.error(item.get("name"), where + ".name", "a rate limit cannot replace itself");
                }
                replaced.add(other);
            }
            replaces.put(pattern, replaced);
        }
        boolean unlimited = flag(nodes, fields, "unlimited", field);
        Long period = null;
        if (fields.containsKey("unit")) {
            String unit = nodes.scalar(fields.get("unit"), field + ".unit");
            EnvoyUnit named = EnvoyUnit.named(unit);
            period = named == null ? null : named.nanos();
            if (period == null && !unlimited) {
                throw nodes.error(fields.get("unit"), field + ".unit", "expected one of " + EnvoyUnit.names()
                        + ", got \"" + unit + "\"");
            }
        }
        if (unlimited) {
            if (period != null) {
                throw nodes.error(fields.get("unit"), field + ".unit", "an unlimited rate limit has no unit");
            }
            unlimitedPatterns.add(pattern);
            return;
        }
        if (period == null) {
            throw nodes.error(node, field + ".unit", "missing");
        }
        // 0 requests a unit, or none given (Envoy's service reads a missing one as 0): every hit is over the limit, as
        // Envoy's README's own example blocks an address; refused, a file that blocked one could not be read at all
        // (a review comparing the two). No policy stands for it, since Sluice's limits start at 1: the pattern is
        // kept, and a call that ends on it is answered as one that brings a limit of 0 (RateLimitService)
        Node perUnit = fields.get("requests_per_unit");
        boolean blocks = perUnit == null || nodes.scalar(perUnit, field + ".requests_per_unit").equals("0");
        long amount = blocks ? 0 : nodes.whole(perUnit, field + ".requests_per_unit", 1);
        if (amount > 0xFFFF_FFFFL) {
            throw nodes.error(perUnit, field + ".requests_per_unit", "more than Envoy's uint32 holds: " + amount);
        }
        String name = given != null ? given : madeName(pattern);
        if (given != null) {
            Integer sluiceLine = sluiceNames.get(name);
            String taken = sluiceLine != null ? "the policy at " + sluiceFile + ":" + sluiceLine : names.get(name);
            if (taken != null) {
                throw nodes.error(fields.get("name"), field + ".name", "\"" + name + "\" is the name of " + taken
                        + " already");
            }
            names.put(name, "the rate_limit at " + nodes.at(node));
            replaceable.add(name); // Envoy replaces only limits that have a name
        } else if (!blocks) {
            madeCount.merge(name, 1, Integer::sum);
            madeAt.put(policies.size(), name);
        }
        if (blocks) {
            if (!shadow) { // a limit of 0 in shadow mode only tells; it refuses nothing, as Envoy's service
                blocked.put(pattern, new ServerConfig.Envoy.Blocked(name, EnvoyUnit.of(period)));
            }
            return;
        }
        List<KeyPart> key = new ArrayList<>();
        List<Descriptor.Entry> path = pattern.descriptor();
        for (int i = 0; i < path.size(); i++) {
            // a shared wildcard (this node's or one above) counts every value it takes as one; else each value on its
            // own, as Envoy's keys do
            key.add(shared.get(i) ? new KeyPart.Const(path.get(i).value())
                    : new KeyPart.DescriptorValue(path.get(i).key()));
        }
        Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.of(amount, period)), Mode.REJECT, 0);
        if (onRedis) {
            try {
                RedisStore.checkExact(rule);
            } catch (IllegalArgumentException e) { // a year: loaded, it would fail every decision
                throw nodes.error(fields.get("unit"), field + ".unit", e.getMessage());
            }
        }
        policies.add(new PolicyConfig(name, pattern, List.copyOf(key), rule, null, 1, null, shadow, false));
    }

    /**
     * The name of a limit without one: its path as Envoy names it in its statistics, any character a policy name
     * cannot hold made {@code _}; made unique by {@link #policies()} when another policy has it too.
     */
    private String madeName(PolicyConfig.Match pattern) {
        StringBuilder made = new StringBuilder(pattern.domain());
        for (Descriptor.Entry entry : pattern.descriptor()) {
            made.append('.').append(entry.key());
            if (entry.value() != null) {
                made.append('_').append(entry.value());
            }
        }
        String name = NOT_IN_NAME.matcher(made).replaceAll("_");
        if (!NAME.matcher(name).matches()) {
            name = "envoy." + name;
        }
        return name; // made unique in policies(), once every limit's is known
    }

    /** A YAML 1.1 flag, as Envoy's service reads one ({@code true}, {@code yes}, {@code on}, ...). */
    private static boolean flag(YamlNodes nodes, Map<String, Node> fields, String name, String field)
            throws ConfigException {
        if (!fields.containsKey(name)) {
            return false;
        }
        String text = nodes.scalar(fields.get(name), field + "." + name);
        if (!TRUE.contains(text) && !FALSE.contains(text)) {
            throw nodes.error(fields.get(name), field + "." + name, "expected true or false, got \"" + text + "\"");
        }
        return TRUE.contains(text);
    }
}
