package dev.sluice.server.request;

import java.util.List;
import java.util.regex.Pattern;

/**
 * One part of a policy's key (docs/server.md): the parts' values, joined with {@code |}, are the key a request
 * is counted under. {@code |} and {@code %} inside a value are percent-escaped, so two different requests
 * never share a key by accident ({@code a|b} + {@code c} against {@code a} + {@code b|c}).
 */
public sealed interface KeyPart {
    /** A header name: an HTTP token (RFC 9110 §5.6.2). */
    Pattern NAME = Pattern.compile("[A-Za-z0-9!#$%&'*+.^_`|~-]+");
    /**
     * A query parameter name as {@link QueryString} compares it, decoded: any text without control characters (a
     * request carries {@code &}, {@code =}, {@code +} or {@code #} escaped). A review found the header rule used for
     * both: it refused {@code user[id]} and {@code café}, and took {@code query:a%20b}, which only {@code a%2520b}
     * matches; a name that holds an escape is refused ({@link #parse}).
     */
    Pattern QUERY_NAME = Pattern.compile("[^\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]+"); // no control, format or line-breaking character

    /** This part's value for {@code request}, or null when the request does not carry it. */
    String valueOf(ClientRequest request);

    /** How many times {@code request} gives this part: once at most, but for a header or query parameter. */
    default int timesGiven(ClientRequest request) {
        return 1;
    }

    /** The client's address. */
    record Ip() implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.ip();
        }

        public String toString() {
            return "ip";
        }
    }

    /** A request header. */
    record Header(String name) implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.header(name);
        }

        public int timesGiven(ClientRequest request) {
            return request.headerCount(name);
        }

        public String toString() {
            return "header:" + name;
        }
    }

    /**
     * A cookie of the {@code Cookie} header ({@code sid=...}), its value as sent, a quoted one without its quotes
     * (nginx's {@code $cookie_NAME}), percent-escapes decoded: frameworks decode them, and {@code sid=%61bc} was
     * another key than {@code sid=abc} for the same session (a review). RFC 6265 has a client send one {@code Cookie}
     * header: two, or the cookie twice in it, are counted as given twice, since the application may read another of
     * them; two headers so even when the first lacks the cookie (a review found the second's then unread, and the
     * limit passed over).
     */
    record Cookie(String name) implements KeyPart {
        public String valueOf(ClientRequest request) {
            List<String> values = values(request);
            if (values.isEmpty()) {
                return null;
            }
            String value = values.get(0);
            return decoded(value.length() >= 2 && value.startsWith("\"") && value.endsWith("\"")
                    ? value.substring(1, value.length() - 1) : value);
        }

        /**
         * {@code value} with its percent-escapes decoded as a path's and a query's are ({@link RequestLine#percentBytes}),
         * as UTF-8; a value whose bytes are not UTF-8 is read whole one char a byte (ISO-8859-1), as JavaScript's
         * {@code escape()} wrote it ({@code %E9} for é) and as a Basic user's name is read: {@code %ff} and
         * {@code %fe} are two keys, {@code %E9} and {@code %C3%A9} one (é). A cookie had a decoder of its own, which took non-ASCII digits for hex ({@code %٣١} read
         * as {@code 1}), wrote each half of a character past U+FFFF as {@code ?}, and read bytes that are not UTF-8 as
         * U+FFFD, so {@code sid=%ff} and {@code sid=%fe} were one key (the structure review); a 400 for them, as a
         * query gets, would refuse requests the application serves (a review of that fix).
         */
        private static String decoded(String value) {
            if (value.indexOf('%') < 0) {
                return value;
            }
            byte[] bytes = RequestLine.percentBytes(value, false);
            return new String(bytes, StrictUtf8.firstBadByte(bytes) < 0 ? java.nio.charset.StandardCharsets.UTF_8
                    : java.nio.charset.StandardCharsets.ISO_8859_1);
        }

        /** The values of this cookie in the (first) {@code Cookie} header, as sent, in order. */
        private List<String> values(ClientRequest request) {
            String header = request.header("Cookie");
            if (header == null) {
                return List.of();
            }
            List<String> values = new java.util.ArrayList<>(1);
            for (String pair : header.split(";")) {
                int equals = pair.indexOf('=');
                if (equals > 0 && pair.substring(0, equals).trim().equals(name)) {
                    values.add(pair.substring(equals + 1).trim());
                }
            }
            return values;
        }

        public int timesGiven(ClientRequest request) {
            int times = values(request).size();
            return request.headerCount("Cookie") > 1 ? Math.max(2, times) : times;
        }

        public String toString() {
            return "cookie:" + name;
        }
    }

    /** A query parameter. */
    record Query(String name) implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.query(name);
        }

        public int timesGiven(ClientRequest request) {
            return request.queryCount(name);
        }

        public String toString() {
            return "query:" + name;
        }
    }

    /** The request's path, without the query. */
    record Route() implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.path();
        }

        public String toString() {
            return "route";
        }
    }

    /** The request's method as a policy counts it ({@link ClientRequest#countedMethod}: a HEAD's is GET). */
    record Method() implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.countedMethod();
        }

        public String toString() {
            return "method";
        }
    }

    /** The request's host, without the port. */
    record Host() implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.host();
        }

        public String toString() {
            return "host";
        }
    }

    /** The value of an entry of an Envoy descriptor ({@link Descriptor}); an HTTP request has none. */
    record DescriptorValue(String key) implements KeyPart {
        /** An entry's key as a policy may name it: anything without white space or {@code =}. */
        public static final Pattern KEY = Pattern.compile("[^\\s=]+");

        public String valueOf(ClientRequest request) {
            return request instanceof Descriptor descriptor ? descriptor.value(key) : null;
        }

        public String toString() {
            return "descriptor:" + key;
        }
    }

    /**
     * The request's user ({@link ClientRequest#user}): in the servlet filter, the one the application authenticated
     * (the container's or Spring Security's principal); in the gateway, the user name of {@code Authorization: Basic},
     * nginx's {@code $remote_user}. Missing for a request without one.
     */
    record User() implements KeyPart {
        public String valueOf(ClientRequest request) {
            return request.user();
        }

        public int timesGiven(ClientRequest request) {
            return request.userCount();
        }

        public String toString() {
            return "user";
        }
    }

    /** A fixed text: one counter for every request the policy matches. */
    record Const(String text) implements KeyPart {
        public String valueOf(ClientRequest request) {
            return text;
        }

        public String toString() {
            return "const:" + text;
        }
    }

    /**
     * Reads {@code ip}, {@code header:NAME}, {@code cookie:NAME}, {@code query:NAME}, {@code route}, {@code method}, {@code host},
     * {@code user}, {@code descriptor:KEY} or {@code const:TEXT}; an {@link IllegalArgumentException} says what is wrong.
     */
    static KeyPart parse(String text) {
        switch (text) {
            case "ip":
                return new Ip();
            case "route":
                return new Route();
            case "method":
                return new Method();
            case "host":
                return new Host();
            case "user":
                return new User();
            default:
                break;
        }
        if (text.startsWith("header:")) {
            String name = text.substring("header:".length());
            if (!NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("bad header name in \"" + text + "\": expected an HTTP token"
                        + " (letters, digits and !#$%&'*+.^_`|~-)");
            }
            return new Header(name);
        }
        if (text.startsWith("cookie:")) {
            String name = text.substring("cookie:".length());
            if (!NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("bad cookie name in \"" + text + "\": expected a token"
                        + " (letters, digits and !#$%&'*+.^_`|~-)");
            }
            return new Cookie(name);
        }
        if (text.startsWith("query:")) {
            String name = text.substring("query:".length());
            if (!QUERY_NAME.matcher(name).matches() || RequestLine.holdsEscape(name)) {
                throw new IllegalArgumentException("bad query parameter name in \"" + text + "\": a name is written"
                        + " decoded (query:a b for a+b or a%20b), without control characters");
            }
            return new Query(name);
        }
        if (text.startsWith("descriptor:")) {
            String key = text.substring("descriptor:".length());
            if (!DescriptorValue.KEY.matcher(key).matches()) {
                throw new IllegalArgumentException("bad descriptor key in \"" + text + "\": expected text without"
                        + " spaces or '='");
            }
            return new DescriptorValue(key);
        }
        if (text.startsWith("const:") && text.length() > "const:".length()) {
            return new Const(text.substring("const:".length()));
        }
        throw new IllegalArgumentException("unknown key part \"" + text
                + "\": expected ip, header:NAME, cookie:NAME, query:NAME, route, method, host, user, descriptor:KEY"
                + " or const:TEXT");
    }

    /**
     * The key of {@code request} under {@code parts}, those of {@code policy}: a missing part counts as the empty
     * value, unless {@code skipIfMissing}, when the answer is null (the policy does not apply). A header or query
     * parameter given more than once is a {@link BadRequest}: the upstream may read another of its values than
     * the first, and a client that sent {@code X-User: r1} and {@code X-User: victim} would be counted as
     * {@code r1} and served as {@code victim} (a bug found by trying the gateway), as a cost header given twice
     * already was.
     */
    static String keyOf(List<KeyPart> parts, ClientRequest request, boolean skipIfMissing, String policy) {
        StringBuilder key = new StringBuilder();
        for (int i = 0; i < parts.size(); i++) {
            KeyPart part = parts.get(i);
            String value = part.valueOf(request);
            if (part.timesGiven(request) > 1) { // before a value that is missing: a cookie in a second Cookie header
                throw new BadRequest((part instanceof Header header ? "header " + header.name()
                        : part instanceof Cookie cookie ? "cookie " + cookie.name()
                        : part instanceof User ? "header Authorization"
                        : "query parameter " + ((Query) part).name()) + " (the key of policy " + policy + "): given "
                        + part.timesGiven(request) + " times; a key is given once");
            }
            if (value == null) {
                if (skipIfMissing) {
                    return null;
                }
                value = "";
            }
            if (i > 0) {
                key.append('|');
            }
            escaped(key, value);
        }
        return key.toString();
    }

    /** Appends {@code value} with {@code |} (which joins the parts of a key) and {@code %} escaped. */
    public static StringBuilder escaped(StringBuilder key, String value) {
        for (int c = 0; c < value.length(); c++) {
            char ch = value.charAt(c);
            switch (ch) {
                case '|' -> key.append("%7C");
                case '%' -> key.append("%25");
                default -> key.append(ch);
            }
        }
        return key;
    }
}
