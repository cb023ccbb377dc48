package dev.sluice.server.request;

import java.util.regex.Pattern;

/**
 * A path pattern of {@code sluice.yaml}: {@code *} matches any characters within one segment, a whole segment
 * {@code **} matches any number of segments (none included), so {@code /api/**} matches {@code /api},
 * {@code /api/} and {@code /api/items/7}, and {@code /export/*} matches {@code /export/report} but not
 * {@code /export/a/b}. Every other character stands for itself.
 */
public record PathGlob(String text, Pattern pattern) {
    /** Compiles {@code glob}; an {@link IllegalArgumentException} says what is wrong with it. */
    public static PathGlob compile(String glob) {
        if (!glob.startsWith("/")) {
            throw new IllegalArgumentException("a path starts with /");
        }
        StringBuilder regex = new StringBuilder();
        String[] segments = glob.substring(1).split("/", -1);
        for (int i = 0; i < segments.length; i++) {
            neverServed(segments[i], i == segments.length - 1);
        }
        for (String segment : segments) {
            if (segment.equals("**")) {
                regex.append("(?:/.*)?");
                continue;
            }
            if (segment.contains("**")) {
                throw new IllegalArgumentException("** must be a whole segment, as in /api/**");
            }
            regex.append('/');
            int from = 0;
            for (int star = segment.indexOf('*'); star >= 0; star = segment.indexOf('*', from)) {
                regex.append(quoted(segment.substring(from, star))).append("[^/]*");
                from = star + 1;
            }
            regex.append(quoted(segment.substring(from)));
        }
        // DOTALL: a decoded path may hold a line break (%0A, %E2%80%A8), which . would not match, and /api/** would
        // let such a request through uncharged (a bug a review found)
        return new PathGlob(glob, Pattern.compile(regex.toString(), Pattern.DOTALL));
    }

    /**
     * Refuses what no path a request is matched on holds: requests are matched with their parameters cut, their
     * repeated slashes merged and their dot segments resolved ({@link RequestLine#servedPath}), so a pattern of
     * {@code /a;v=1/b}, {@code //a} or {@code /a/../b} matched nothing, and its policy limited nothing without a
     * word (a review found it); and an escape, {@code /caf%C3%A9}: paths are matched decoded. A {@code ?}, a
     * {@code #}, a {@code \} or a {@code %} alone stay: a path decoded from {@code %3F}, {@code %23}, {@code %5C} or
     * {@code %25} holds them (a second review found them refused, which refused files that had worked).
     */
    private static void neverServed(String segment, boolean last) {
        if (segment.isEmpty() && !last) {
            throw new IllegalArgumentException("an empty segment (//): paths are matched with repeated slashes merged");
        }
        if (segment.equals(".") || segment.equals("..")) {
            throw new IllegalArgumentException("a segment " + segment + ": paths are matched with . and .. resolved");
        }
        if (segment.indexOf(';') >= 0) {
            throw new IllegalArgumentException("a ;: paths are matched with their parameters cut (/a;v=1/b is /a/b)");
        }
        if (RequestLine.holdsEscape(segment)) {
            throw new IllegalArgumentException("an escape: paths are matched decoded, so a pattern is written decoded"
                    + " (/café, not /caf%C3%A9)");
        }
    }

    private static String quoted(String literal) {
        return literal.isEmpty() ? "" : Pattern.quote(literal);
    }

    public boolean matches(String path) {
        return pattern.matcher(path).matches();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof PathGlob glob && glob.text.equals(text);
    }

    @Override
    public int hashCode() {
        return text.hashCode();
    }

    @Override
    public String toString() {
        return text;
    }
}
