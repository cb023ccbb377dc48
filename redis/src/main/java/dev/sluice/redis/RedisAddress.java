package dev.sluice.redis;

import io.lettuce.core.RedisURI;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The addresses a {@link RedisStore} connects to, {@code redis://host:port[/db]} or
 * {@code redis-cluster://h1:p1,h2:p2}, or {@code redis-sentinel://h1:p1,h2:p2[/db]#primary} ({@code rediss://},
 * {@code rediss-cluster://} and {@code rediss-sentinel://} over TLS), read and checked before anything is started, and
 * shown with their passwords hidden.
 *
 * <p>Lettuce reads much that is not an address as one ({@code host:0} and {@code host:} as port 6379,
 * {@code host:abc} as a host of that name), and its words for the rest are a JDK parser's ("Expected authority at
 * index 8"), which may quote the password. So each part is checked here first, and each message names the address
 * as {@link #shown} writes it.
 */
final class RedisAddress {
    /** What connecting (the handshake after the socket opens) may take, however short the per-call timeout. */
    static final Duration HANDSHAKE = Duration.ofSeconds(2);
    private static final String CLUSTER = "redis-cluster://";
    private static final String TLS_CLUSTER = "rediss-cluster://";
    private static final String SENTINEL = "redis-sentinel://";
    private static final String TLS_SENTINEL = "rediss-sentinel://";
    private static final String EXPECTED = "expected redis://host:port[/db] or redis-cluster://host:port,host:port"
            + " or redis-sentinel://host:port,host:port[/db]#primary (rediss://, rediss-cluster://, rediss-sentinel://"
            + " for TLS)";

    /** A node of a Cluster address: optional credentials to an {@code @}, a host, and a port of digits. */
    private static final Pattern NODE = Pattern.compile("^(?:[^@]*@)?(?:\\[[^\\]]+\\]|[^:@\\[\\]/]+)(?::[^/@]*)?(?:/.*)?$");

    /**
     * A {@link #NODE} whose port is digits: {@code default:abc,def@h1:7000} read {@code default:abc} as a node, and
     * showed it (a review).
     */
    private static final Pattern NUMBERED_NODE =
            Pattern.compile("^(?:[^@]*@)?(?:\\[[^\\]]+\\]|[^:@\\[\\]/?]+)(?::[0-9]*)?(?:[/?].*)?$");

    /** The scheme (if any), then an optional user and its colon, then the password, to the last @. */
    private static final Pattern CREDENTIALS = Pattern.compile("^((?:[a-z-]+://)?)(?:([^:@/]*):)?.*@");

    private RedisAddress() {
    }

    /**
     * Whether {@code part}, between commas of the Cluster address {@code uri}, is a node. In an address with
     * credentials, one without its own whose port is not digits may be a piece of a password cut at a comma.
     */
    private static boolean isNode(String part, String uri) {
        String node = part.trim();
        return NODE.matcher(node).matches()
                && (node.indexOf('@') >= 0 || uri.indexOf('@') < 0 || NUMBERED_NODE.matcher(node).matches());
    }

    /**
     * Whether a part of the Cluster address {@code uri} without credentials comes before one with some: the first may
     * then be the start of a password with a comma ({@code default:1234,5678@h1:7000} and
     * {@code s3cret,tail@h1:7000} were read as nodes of their own, shown and connected to: the diff review). Such an
     * address is refused, and shown hidden to its last {@code @}; credentials go on the first node, or on each.
     * So is one whose nodes carry different credentials: a Cluster's nodes share one password (Lettuce sends the
     * first seed's to the nodes it finds), and a password holding an {@code @} and a comma was read so
     * ({@code :a@b,c@h1:7000} as node {@code b} with password {@code a}, and shown {@code :****@b,****@h1:7000}: a
     * review).
     */
    private static boolean cutAtComma(String uri) {
        boolean without = false;
        String credentials = null;
        for (String part : afterScheme(uri).split(",", -1)) {
            int at = part.lastIndexOf('@');
            if (at < 0) {
                without = true;
            } else if (without || credentials != null && !credentials.equals(part.substring(0, at).trim())) {
                return true;
            } else {
                credentials = part.substring(0, at).trim();
            }
        }
        return false;
    }

    /**
     * Whether a piece of {@code uri}'s password could be read as something else, and shown as such: a Cluster's part
     * between commas ({@link #cutAtComma}), or a Sentinel's primary name after a {@code #} that comes before the
     * credentials' {@code @}. {@link #seeds} refuses such an address, quoting none of it.
     */
    static boolean passwordInDoubt(String uri) {
        if (isCluster(uri)) {
            return cutAtComma(uri);
        }
        int hash = uri.lastIndexOf('#');
        return (uri.startsWith(SENTINEL) || uri.startsWith(TLS_SENTINEL)) && hash >= 0 && hash < uri.lastIndexOf('@');
    }

    /** Whether {@code uri} is reached over TLS: {@code rediss://}, {@code rediss-cluster://}, {@code rediss-sentinel://}. */
    static boolean isTls(String uri) {
        return uri.startsWith("rediss://") || uri.startsWith(TLS_CLUSTER) || uri.startsWith(TLS_SENTINEL);
    }

    /** Whether {@code uri} names a Cluster. */
    static boolean isCluster(String uri) {
        return uri.startsWith(CLUSTER) || uri.startsWith(TLS_CLUSTER);
    }

    /** The part of {@code uri} after its scheme's {@code ://}. */
    private static String afterScheme(String uri) {
        return uri.substring(uri.indexOf("://") + 3);
    }

    /**
     * The nodes of {@code uri}, each with {@code timeout} (or {@link #HANDSHAKE}, if longer) for its handshake.
     *
     * @throws IllegalArgumentException naming the address, its password hidden
     */
    static List<RedisURI> seeds(String uri, Duration timeout) {
        if (uri == null) {
            throw new IllegalArgumentException("bad Redis address: null; " + EXPECTED);
        }
        List<RedisURI> seeds = new ArrayList<>();
        if (isCluster(uri)) {
            String scheme = uri.startsWith(TLS_CLUSTER) ? "rediss://" : "redis://";
            String[] nodes = afterScheme(uri).split(",", -1);
            if (Arrays.stream(nodes).anyMatch(String::isBlank)) {
                throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a node is missing"
                        + " between commas; expected redis-cluster://host:port,host:port");
            }
            if (cutAtComma(uri)) {
                throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a part between"
                        + " commas without credentials comes before one with them, or parts carry different ones, and"
                        + " may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials"
                        + " go on the first node, or the same on each)");
            }
            for (String node : nodes) {
                if (!isNode(node, uri)) {
                    // with credentials in the address, the part may be a piece of a password: never quoted
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": "
                            + (uri.indexOf('@') >= 0 ? "a part" : "\"" + node.trim() + "\"") + " between commas is not"
                            + " a node [credentials@]host:port (a comma in a password is written %2C)");
                }
                RedisURI seed = address(scheme + node.trim(), uri, timeout);
                if (seed.getDatabase() != 0) {
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a Cluster has only"
                            + " database 0, got /" + seed.getDatabase());
                }
                seeds.add(seed);
            }
        } else if (uri.startsWith(SENTINEL) || uri.startsWith(TLS_SENTINEL)) {
            seeds.add(sentinels(uri, timeout));
        } else if (uri.startsWith("redis://") || uri.startsWith("rediss://")) {
            if (authorityOf(uri).contains(",")) { // was read as one host named "h1:p1,h2", found by no lookup
                throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a standalone Redis is"
                        + " one host:port; several nodes are a Cluster's, redis-cluster://host:port,host:port");
            }
            seeds.add(address(uri, uri, timeout));
        } else {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri)
                    + "\": " + EXPECTED);
        }
        return seeds;
    }

    /**
     * A primary found through Redis Sentinel, {@code redis-sentinel://[credentials@]h1:p1,h2:p2[/db]#name}: the
     * sentinels (port 26379 unless given), each checked as a node is, and the name of the primary they watch; the
     * credentials and database are the primary's (sentinels are sent the credentials too: {@link Sentinels}). Through
     * {@code rediss-sentinel://} both the sentinels and the primary are reached over TLS.
     */
    private static RedisURI sentinels(String uri, Duration timeout) {
        String scheme = uri.startsWith(TLS_SENTINEL) ? "rediss://" : "redis://";
        int hash = uri.lastIndexOf('#');
        if (passwordInDoubt(uri)) {
            // a # in a password: what follows it was taken for the primary's name, and shown in the start's failure,
            // the password's end with it (a review); never quoted here
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a # in the credentials (in"
                    + " a password, written %23); the primary's name comes after the nodes: "
                    + uri.substring(0, uri.indexOf("://") + 3) + "host:port,host:port#name");
        }
        if (hash < 0 || hash == uri.length() - 1) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a Sentinel address names"
                    + " the primary its sentinels watch, after #: " + uri.substring(0, uri.indexOf("://") + 3)
                    + "host:port,host:port#name");
        }
        String sentinels = uri.substring(0, hash);
        String nodes = authorityOf(sentinels);
        List<RedisURI> each = new ArrayList<>();
        for (String node : nodes.split(",", -1)) {
            if (node.isBlank()) {
                throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a sentinel is missing"
                        + " between commas; expected " + uri.substring(0, uri.indexOf("://") + 3)
                        + "host:port,host:port#name");
            }
            RedisURI sentinel = address(scheme + node.trim(), uri, timeout); // its host and port, as any node's
            each.add(RedisURI.create(sentinel.getHost(), portOf("redis://" + node.trim()) == null ? 26379
                    : sentinel.getPort()));
        }
        // the primary's credentials, database and options, read as a node's (read whole by Lettuce, a node without
        // its port or of IPv6 was refused, a review found)
        String afterScheme = afterScheme(sentinels);
        int at = afterScheme.lastIndexOf('@');
        RedisURI primary = address(scheme + afterScheme.substring(0, at + 1) + "primary"
                + afterScheme.substring(at + 1 + nodes.length()), uri, timeout);
        primary.setSentinelMasterId(uri.substring(hash + 1));
        primary.getSentinels().addAll(each);
        return primary;
    }

    /** Whether {@code seed} names a primary found through Redis Sentinel. */
    static boolean isSentinel(RedisURI seed) {
        return seed.getSentinelMasterId() != null;
    }

    /**
     * {@code uri} as it may be shown to anyone (messages, health checks, dashboards): a password in it
     * ({@code redis://:secret@host}, {@code redis://user:secret@host}, Lettuce's {@code redis://secret@host}) is
     * written {@code ****}. Everything before the last {@code @} is credentials: a host, port or database has none.
     */
    static String shown(String uri) {
        if (isCluster(uri) && uri.indexOf(',') > 0) {
            // each node may carry its own credentials: each hidden on its own, so no node disappears; but only if
            // every part between commas is a node (a comma inside a password would show the part before it)
            String[] each = afterScheme(uri).split(",", -1);
            if (!cutAtComma(uri) && Arrays.stream(each).allMatch(node -> isNode(node, uri))) {
                StringBuilder nodes = new StringBuilder(uri.substring(0, uri.indexOf("://") + 3));
                for (int i = 0; i < each.length; i++) {
                    nodes.append(i == 0 ? "" : ",").append(shown(each[i]));
                }
                return nodes.toString();
            }
        }
        Matcher credentials = CREDENTIALS.matcher(uri);
        if (!credentials.find()) {
            return uri;
        }
        String user = credentials.group(2);
        return credentials.group(1) + (user == null ? "" : user + ":") + "****@" + uri.substring(credentials.end());
    }

    /**
     * The port of a node {@code redis://[credentials@]host[:port][/db][?options]} as written, or null when it has
     * none: what follows the host after the last {@code @} (so never a part of the credentials), up to a
     * {@code /} or {@code ?}; an IPv6 host is in brackets.
     */
    private static String portOf(String node) {
        String authority = authorityOf(node);
        int colon = authority.startsWith("[") ? authority.indexOf(':', Math.max(authority.indexOf(']'), 0))
                : authority.lastIndexOf(':');
        return colon < 0 ? null : authority.substring(colon + 1);
    }

    /** The host and port of {@code redis://[credentials@]host:port[/db][?options]}, as written. */
    private static String authorityOf(String node) {
        String rest = afterScheme(node);
        String authority = rest.substring(rest.lastIndexOf('@') + 1);
        int end = 0;
        while (end < authority.length() && authority.charAt(end) != '/' && authority.charAt(end) != '?'
                && authority.charAt(end) != '#') {
            end++;
        }
        return authority.substring(0, end);
    }

    /** The host of an {@link #authorityOf authority}, {@code host[:port]} or {@code [v6][:port]}. */
    private static String hostOf(String authority) {
        if (authority.startsWith("[")) {
            int end = authority.indexOf(']');
            return end < 0 ? authority : authority.substring(0, end + 1);
        }
        int colon = authority.lastIndexOf(':');
        return colon < 0 ? authority : authority.substring(0, colon);
    }

    /** {@code host} without the brackets of an IPv6 address, which Lettuce may keep or drop; "" for null. */
    private static String unbracketed(String host) {
        if (host == null) {
            return "";
        }
        return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    }

    /** The database of {@code redis://[credentials@]host:port[/db][?options]} as written, or null. */
    private static String databaseOf(String node) {
        String rest = afterScheme(node);
        String path = rest.substring(rest.lastIndexOf('@') + 1 + authorityOf(node).length());
        int query = path.indexOf('?');
        path = query < 0 ? path : path.substring(0, query);
        int name = path.indexOf('#'); // a Sentinel's primary
        path = name < 0 ? path : path.substring(0, name);
        return path.isEmpty() || path.equals("/") ? null : path.substring(1);
    }

    /** One node, {@code redis://[credentials@]host:port[/db][?options]}, of the address {@code uri}. */
    private static RedisURI address(String node, String uri, Duration timeout) {
        return checkedTls(created(node, uri, timeout), uri);
    }

    /** {@link #address}, its TLS options unchecked. */
    private static RedisURI created(String node, String uri, Duration timeout) {
        // the port as written: Lettuce reads "host:0" and "host:" as 6379, and "host:abc" as a host of that name
        String written = portOf(node);
        if (written != null
                && (!written.matches("[0-9]{1,5}") || Integer.parseInt(written) < 1 || Integer.parseInt(written) > 65535)) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": port \"" + written
                    + "\" of " + afterScheme(shown(node)) + ": expected 1 to 65535");
        }
        // Lettuce's own words for these are a JDK parser's: "Expected authority at index 8", "For input string"
        String authority = authorityOf(node);
        if (authority.isEmpty() || authority.startsWith(":")) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": no host; expected"
                    + " redis://host:port[/db]");
        }
        String database = databaseOf(node);
        if (database != null && (!database.matches("[0-9]{1,10}") || Long.parseLong(database) > Integer.MAX_VALUE)) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": database \"" + database
                    + "\": expected a number from 0 to " + Integer.MAX_VALUE);
        }
        try {
            RedisURI address = RedisURI.create(node);
            if (!unbracketed(address.getHost()).equals(unbracketed(hostOf(authority)))) {
                if (!CREDENTIALS.matcher(node).find()) { // no secret to keep: what was read, said
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": its host is read as \""
                            + address.getHost() + "\", not \"" + hostOf(authority) + "\" as written (a host name is"
                            + " letters, digits, - and .)");
                }
                // a # or ? in a password ends the address where the JDK reads it, and Lettuce took the password's
                // start for the host, without a password (a review): refused, and the host it read is not quoted
                throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": not read as written"
                        + " (in a password, characters such as #, ?, /, @ and , are written percent-encoded: %23 for #)");
            }
            Matcher credentials = CREDENTIALS.matcher(node);
            if (address.getUsername() == null && credentials.find() && credentials.group(2) != null
                    && !credentials.group(2).isEmpty()) {
                // redis://user:@host, a user whose password is given apart (RedisStore.Builder#password): Lettuce drops
                // a user without a password, and the store would have authenticated as the default user (a review)
                address.setUsername(java.net.URLDecoder.decode(credentials.group(2).replace("+", "%2B"),
                        java.nio.charset.StandardCharsets.UTF_8)); // percent-decoded, as the password is; a + is a +
            }
            // the URI's timeout bounds the connection handshake; each call is bounded by TimeoutOptions instead
            address.setTimeout(timeout.compareTo(HANDSHAKE) < 0 ? HANDSHAKE : timeout);
            return address;
        } catch (IllegalArgumentException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("bad Redis address \"")) {
                throw e; // ours, above
            }
            // e is not kept as the cause, nor its message when the address has credentials: a / in a password
            // made the rest of it a path, which Lettuce quoted as a port it could not read (a review)
            boolean secret = CREDENTIALS.matcher(uri).find();
            String reason = e.getMessage() == null || secret ? "" : e.getMessage();
            if (reason.isEmpty()) {
                reason = "not a valid URI";
            }
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": " + reason + (secret
                    ? " (in a password, characters such as a space, /, %, {, # are written percent-encoded: %20 for a space)"
                    : ""));
        }
    }

    /** {@code address}, unless its options would not check a TLS server's certificate. */
    private static RedisURI checkedTls(RedisURI address, String uri) {
        if (address.isSsl() && address.getVerifyMode() != io.lettuce.core.SslVerifyMode.FULL) {
            // Lettuce's option took the check of each Cluster node's certificate away, silently (a review)
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": verifyPeer="
                    + address.getVerifyMode() + " would not check " + (address.getVerifyMode()
                    == io.lettuce.core.SslVerifyMode.CA ? "that the server's certificate names the host"
                    : "the server's certificate at all") + "; Sluice always checks it (give the certificates to trust)");
        }
        return address;
    }
}
