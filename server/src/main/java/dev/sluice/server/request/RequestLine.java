package dev.sluice.server.request;

/**
 * The request line read as a server that serves it reads it: the method checked, the target refused when the gateway
 * and the servlet filter would read it otherwise than the upstream ({@link #checkTarget}), the path as policies match it
 * ({@link #servedPath}), and percent-escapes decoded strictly ({@link #percentDecoded(String, boolean)}).
 */
public final class RequestLine {
    private RequestLine() {
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
    public static String servedPath(String raw) {
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
    public static String percentDecoded(String text, boolean plusIsSpace) {
        byte[] decoded = percentBytes(text, plusIsSpace);
        return StrictUtf8.firstBadByte(decoded) >= 0 ? null
                : new String(decoded, java.nio.charset.StandardCharsets.UTF_8);
    }

    /** The bytes {@code text} stands for: its escapes decoded, its other characters as UTF-8 (see percentDecoded). */
    public static byte[] percentBytes(String text, boolean plusIsSpace) {
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
        return bytes.toByteArray();
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
    public static boolean escapesWellFormed(String path) {
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
     * {@code #} anywhere in it, a {@code \} in its {@code path} ({@link #BACKSLASH}), a {@code %} in its path not
     * followed by two hex digits, or a DEL or a byte past ASCII anywhere in the {@code target} (RFC 9112 3.2: a
     * target is ASCII; a container reads each byte as a char).
     */
    public static void checkTarget(String path, String target) throws BadRequest {
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
    public static void checkMethod(String method) throws BadRequest {
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
}
