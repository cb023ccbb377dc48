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
        for (String segment : glob.substring(1).split("/", -1)) {
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
