package dev.sluice.server.request;

/**
 * What a policy may look at in an HTTP request: the gateway reads it off the request it proxies,
 * {@code POST /v1/check-request} off the JSON that describes one.
 */
public interface ClientRequest {
    /** In capitals: {@code GET}. */
    String method();

    /**
     * The method as a policy counts it: a HEAD's is GET. A HEAD is a GET whose answer has no body, and containers and
     * frameworks serve it by running the GET; so a policy for GET matches it, and a key of its method counts it as
     * one (a review found a HEAD getting round a policy for GET, and a quota of HEADs beside the GETs).
     */
    default String countedMethod() {
        String method = method();
        return method.equals("HEAD") ? "GET" : method;
    }

    /** Without the query, as {@link #servedPath} makes it: {@code /api/items}. */
    String path();

    /** The Host without its port, in lower case, or null when the request has none. */
    String host();

    /** The client's address, after {@code X-Forwarded-For} from trusted proxies. */
    String ip();

    /** The first value of a header (names compare ignoring case), or null. */
    String header(String name);

    /** How many times a header is given: a value that decides (a cost, a key) must be given once, or it is ambiguous. */
    default int headerCount(String name) {
        return header(name) == null ? 0 : 1;
    }

    /** The first value of a query parameter, or null. */
    String query(String name);

    /**
     * The request's user, or null: as nginx's {@code $remote_user}, the user name of an {@code Authorization: Basic}
     * header, which the gateway does not check (the upstream does, or a layer before it); the servlet filter's
     * requests answer the user the application authenticated instead.
     */
    default String user() {
        return ClientRequest.basicUser(header("Authorization"));
    }

    /** How many times the request gives its user: a user given twice is ambiguous. */
    default int userCount() {
        return headerCount("Authorization");
    }

    /**
     * The user name of {@code authorization} when it is {@code Basic} credentials (the scheme in any case), the text
     * before the first {@code :} of their Base64, read as UTF-8 (RFC 7617), or, when it is not UTF-8, one char a byte
     * (ISO-8859-1, the charset of older clients), so that no two names read the same; else null, as for credentials
     * that are no Base64 of user and password, or of an empty user, which nginx's {@code $remote_user} leaves empty
     * too (a review found names of bytes past UTF-8 read as one, U+FFFD, and an empty user counted as a key).
     */
    static String basicUser(String authorization) {
        if (authorization == null || authorization.length() < 6
                || !authorization.regionMatches(true, 0, "Basic ", 0, 6)) {
            return null;
        }
        byte[] decoded;
        try {
            decoded = java.util.Base64.getDecoder().decode(authorization.substring(6).strip());
        } catch (IllegalArgumentException notBase64) {
            return null;
        }
        String credentials;
        try {
            credentials = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                    .decode(java.nio.ByteBuffer.wrap(decoded)).toString();
        } catch (java.nio.charset.CharacterCodingException notUtf8) {
            credentials = new String(decoded, java.nio.charset.StandardCharsets.ISO_8859_1);
        }
        int colon = credentials.indexOf(':');
        return colon <= 0 ? null : credentials.substring(0, colon);
    }

    /** How many times a query parameter is given: a value that decides (a key) must be given once. */
    default int queryCount(String name) {
        return query(name) == null ? 0 : 1;
    }

    /**
     * The path as a server that serves it reads it, which is what policies match and {@code route} keys: escapes
     * ({@code %61}) decoded as UTF-8, parameters cut from each segment ({@code /api;v=1/items}, as servlet
     * containers cut them), repeated slashes merged, {@code .} and {@code ..} segments resolved (none climbs above
     * the root); always from the root. Read as written, {@code //api/items}, {@code /v1/../api/items},
     * {@code /public/..;/api/items} and {@code /%61pi/items} would each escape a policy for {@code /api/**}, or make
     * a {@code route} key of their own, and still reach {@code /api/items} on an upstream that normalises. It may
     * match more than the upstream serves (a {@code ;} it reads literally), never less. A malformed escape is kept
     * as written; escapes that stand for bytes that are not UTF-8 are a {@link BadRequest}. The gateway forwards
     * the request as the client wrote it.
     *
     * <p>A parameter that holds an escaped slash ({@code %2F}, or a backslash, {@code %5C}) is a {@link BadRequest}:
     * servers read such a path two ways. A servlet container cuts parameters before it decodes, and serves
     * {@code /login;x%2F..} as {@code /login}; decoded first, it is {@code /login;x/..}, the root. A review sent it
     * through the gateway and the servlet filter to Jetty's {@code /login}, past a policy for {@code /login}.
     */
    static String servedPath(String raw) {
        if (raw.startsWith("/") && raw.indexOf('%') < 0 && raw.indexOf(';') < 0 && !raw.contains("//")
                && !raw.contains("/.")) {
            return raw; // nearly every path: nothing to do
        }
        if (raw.indexOf(';') >= 0 && raw.indexOf('%') >= 0) {
            refuseSlashInParameter(raw);
        }
        String decoded = raw.indexOf('%') < 0 ? raw : percentDecoded(raw);
        java.util.ArrayDeque<String> segments = new java.util.ArrayDeque<>();
        String last = "";
        for (String segment : decoded.split("/", -1)) {
            int parameters = segment.indexOf(';');
            last = parameters < 0 ? segment : segment.substring(0, parameters);
            if (last.equals("..")) {
                segments.pollLast();
            } else if (!last.isEmpty() && !last.equals(".")) {
                segments.addLast(last);
            }
        }
        StringBuilder path = new StringBuilder(decoded.length() + 1);
        for (String segment : segments) {
            path.append('/').append(segment);
        }
        // a path that names a directory (/api/, /api/., /api/x/..) keeps its last slash
        if (path.isEmpty() || last.isEmpty() || last.equals(".") || last.equals("..")) {
            path.append('/');
        }
        return path.toString();
    }

    /** Refuses a path whose {@code ;} parameter, as written, holds an escaped slash or backslash. */
    private static void refuseSlashInParameter(String raw) {
        for (String segment : raw.split("/", -1)) {
            int parameters = segment.indexOf(';');
            if (parameters < 0) {
                continue;
            }
            String parameter = segment.substring(parameters).toUpperCase(java.util.Locale.ROOT);
            if (parameter.contains("%2F") || parameter.contains("%5C")) {
                throw new BadRequest("path \"" + raw + "\": a ';' parameter holds an escaped slash, which servers"
                        + " read two ways (a servlet container cuts the parameter before decoding, others decode"
                        + " first): refused as ambiguous");
            }
        }
    }

    private static String percentDecoded(String raw) {
        String decoded = percentDecoded(raw, false);
        if (decoded == null) {
            throw new BadRequest("path \"" + raw + "\": its escapes stand for bytes that are not UTF-8");
        }
        return decoded;
    }

    /**
     * {@code text} with its escapes ({@code %C3%A9}) decoded, and with {@code plusIsSpace} (a query) each {@code +}
     * a space; a {@code %} not followed by two hex digits is kept as written. Null when the bytes the escapes stand
     * for are not UTF-8: a lenient decoding made each such byte U+FFFD, so {@code /api/%ff} and {@code /api/%fe}, or
     * {@code user=%ff} and {@code user=%fe}, were one key (a bug found by trying the gateway).
     */
    static String percentDecoded(String text, boolean plusIsSpace) {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream(text.length());
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            int high = c == '%' && i + 2 < text.length() ? hexDigit(text.charAt(i + 1)) : -1;
            int low = high < 0 ? -1 : hexDigit(text.charAt(i + 2));
            if (low >= 0) {
                bytes.write(high * 16 + low);
                i += 2;
            } else if (c == '+' && plusIsSpace) {
                bytes.write(' ');
            } else {
                int codePoint = text.codePointAt(i);
                byte[] written = new String(Character.toChars(codePoint)).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                bytes.write(written, 0, written.length);
                i += Character.charCount(codePoint) - 1;
            }
        }
        byte[] decoded = bytes.toByteArray();
        return StrictUtf8.firstBadByte(decoded) >= 0 ? null
                : new String(decoded, java.nio.charset.StandardCharsets.UTF_8);
    }

    /**
     * A string an HTTP decoder read one char per byte (ISO-8859-1, as Netty reads a request's line and headers), as
     * the client meant it: bytes that are UTF-8 are read as UTF-8, as the JSON of {@code /v1/check-request} carries
     * them, so that a header {@code X-User: é} or a path {@code /é} sent raw is the same key as when it is described
     * (and a message that quotes it shows {@code é}, not {@code Ã©}); bytes that are not UTF-8 are left as read.
     */
    static String asSent(String read) {
        if (read == null) {
            return null;
        }
        boolean ascii = true;
        for (int i = 0; i < read.length(); i++) {
            char c = read.charAt(i);
            if (c > 0xFF) {
                return read; // not one char per byte: already decoded
            }
            ascii &= c < 0x80;
        }
        if (ascii) {
            return read; // nearly always: nothing to do
        }
        try {
            return java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                    .decode(java.nio.ByteBuffer.wrap(read.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1)))
                    .toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return read;
        }
    }

    /**
     * Header {@code name}'s value as {@link #asSent} reads it, refusing one whose bytes are not UTF-8: left one char
     * per byte, {@code Jos\xE9} read as the same text as {@code Jos\xC3\xA9} decoded, so two clients whose headers
     * differ shared a key, and one used up the other's limit (a review found it). A path or query so sent is refused
     * already. For the gateway only, whose HTTP decoder reads one char per byte: a servlet container may hand over
     * text decoded already.
     */
    public static String headerAsSent(String name, String read) {
        String sent = asSent(read);
        if (sent == null || sent != read) {
            return sent; // decoded from UTF-8
        }
        boolean pastAscii = false;
        for (int i = 0; i < read.length(); i++) { // one pass: this is on every request a policy reads a header of
            char c = read.charAt(i);
            if (c > 0xFF) {
                return sent; // decoded already
            }
            pastAscii |= c >= 0x80;
        }
        if (!pastAscii) {
            return sent;
        }
        int at = StrictUtf8.firstBadByte(read.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
        throw new BadRequest("header " + name + ": its bytes are not UTF-8 (byte " + String.format("0x%02X",
                (int) read.charAt(Math.max(at, 0))) + " at " + Math.max(at, 0) + "); a header that Sluice reads is sent"
                + " in UTF-8");
    }

    /** Whether {@code text} holds a percent escape ({@code %} and two hex digits). */
    public static boolean holdsEscape(String text) {
        for (int i = text.indexOf('%'); i >= 0; i = text.indexOf('%', i + 1)) {
            if (i + 2 < text.length() && hexDigit(text.charAt(i + 1)) >= 0 && hexDigit(text.charAt(i + 2)) >= 0) {
                return true;
            }
        }
        return false;
    }

    /** Whether every {@code %} of {@code path} is followed by two hex digits, as {@link #servedPath} decodes them. */
    static boolean escapesWellFormed(String path) {
        for (int i = path.indexOf('%'); i >= 0; i = path.indexOf('%', i + 1)) {
            if (i + 2 >= path.length() || hexDigit(path.charAt(i + 1)) < 0 || hexDigit(path.charAt(i + 2)) < 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Why a {@code \} in a path is refused: it is no character of a URI's path (RFC 3986), and the upstreams that
     * parse as browsers do (WHATWG URLs: Node's {@code new URL}, Deno, Bun, undici) take it for {@code /}, so
     * {@code /x/..\api/items} escaped a policy for {@code /api/**} and was served as {@code /api/items} (a review
     * found it). Escaped, {@code %5C}, it is a character of a segment, as everywhere.
     */
    public static final String BACKSLASH = "a \\ has no place in a path; some servers read it as /, so a target sends it"
            + " escaped, as %5C";

    /**
     * Refuses a request target that the gateway and the servlet filter alike answer 400 before deciding it: a
     * {@code #} anywhere in it, a {@code %} in its {@code path} not followed by two hex digits, or a byte past ASCII anywhere in the
     * {@code target} (RFC 9112 3.2: a target is ASCII; a container reads each byte as a char).
     */
    static void checkTarget(String path, String target) throws BadRequest {
        if (target.indexOf('#') >= 0) {
            // no fragment in a request's target (RFC 9112 3.2): the path Sluice matched ran on past it, while most
            // upstreams serve what comes before it, so /api/items#/../../public escaped /api/** and ?api_key=K#1 a
            // key of its own each time (a review found it)
            throw new BadRequest("request target \"" + escapedBeyondAscii(target) + "\": a # (a fragment) has no"
                    + " place in a request; a target sends it escaped, as %23");
        }
        if (path.indexOf('\\') >= 0) {
            throw new BadRequest("request target \"" + escapedBeyondAscii(target) + "\": " + BACKSLASH);
        }
        if (!escapesWellFormed(path)) {
            throw new BadRequest("request target \"" + target + "\": a % that is not followed by two hex digits");
        }
        for (int i = 0; i < target.length(); i++) {
            char c = target.charAt(i);
            if (c >= 0x7F) {
                // the gateway's encoder towards the upstream writes chars as UTF-8: /caf\xE9 reached the upstream
                // as /caf\xC3\xA9 (a bug found by trying the gateway)
                throw new BadRequest("request target \"" + escapedBeyondAscii(target) + "\": byte "
                        + String.format("0x%02X", (int) c) + " is not ASCII; a target sends it escaped, as "
                        + String.format("%%%02X", (int) c));
            }
        }
    }

    /**
     * Refuses a method with a small letter, which the gateway and the servlet filter alike answer 400 before deciding
     * it: methods are case-sensitive (RFC 9110 9.1), so {@code get} is not {@code GET}, and a policy for
     * {@code methods: [GET]} would let it by while a lenient upstream serves it as a GET.
     */
    static void checkMethod(String method) throws BadRequest {
        for (int i = 0; i < method.length(); i++) {
            if (method.charAt(i) >= 'a' && method.charAt(i) <= 'z') {
                throw new BadRequest("method \"" + method + "\": methods are written in capitals, as GET");
            }
        }
    }

    /** {@code target} with each char past ASCII written {@code \xNN}, so that a message shows the bytes sent. */
    private static String escapedBeyondAscii(String target) {
        StringBuilder shown = new StringBuilder(target.length() + 8);
        for (int i = 0; i < target.length(); i++) {
            char c = target.charAt(i);
            shown.append(c < 0x7F ? String.valueOf(c) : String.format("\\x%02X", (int) c));
        }
        return shown.toString();
    }

    /** An ASCII hex digit's value, or -1 (not {@link Character#digit}, which takes other scripts' digits too). */
    private static int hexDigit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    }

    /** {@code api.example.com:8443} → {@code api.example.com}; {@code [::1]:80} → {@code [::1]}. */
    static String hostWithoutPort(String host) {
        if (host == null || host.isEmpty()) {
            return null;
        }
        int colon = host.lastIndexOf(':');
        if (colon > host.lastIndexOf(']')) {
            host = host.substring(0, colon);
        }
        // "api.example.com." is the same host, fully qualified, and routed as it (a past bug: it escaped a
        // policy for api.example.com)
        if (host.length() > 1 && host.endsWith(".")) {
            host = host.substring(0, host.length() - 1);
        }
        return host.toLowerCase(java.util.Locale.ROOT);
    }
}
