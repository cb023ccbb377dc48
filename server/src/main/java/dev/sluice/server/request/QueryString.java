package dev.sluice.server.request;

import java.util.HashMap;
import java.util.Map;

/**
 * The parameters of a query string ({@code page=2&user=u%201}): split on {@code &}, names and values
 * percent-decoded, names compared exactly; of a repeated name the first value, and how many times it was given
 * (a key part refuses a name given twice: {@link KeyPart#keyOf}). The gateway and {@code /v1/check-request} both
 * read queries here, so the same request gets the same key from both.
 */
public record QueryString(Map<String, String> firstValues, Map<String, Integer> times) {
    private static final QueryString NONE = new QueryString(Map.of(), Map.of());

    /** The parameters of {@code query} (null or empty: none); bad percent-encoding is a {@link BadRequest}. */
    public static QueryString parse(String query) {
        if (query == null || query.isEmpty()) {
            return NONE;
        }
        Map<String, String> firstValues = new HashMap<>();
        Map<String, Integer> times = new HashMap<>();
        for (String pair : query.split("&")) {
            if (pair.isEmpty()) {
                continue;
            }
            int equals = pair.indexOf('=');
            String name = decoded(equals < 0 ? pair : pair.substring(0, equals));
            firstValues.putIfAbsent(name, equals < 0 ? "" : decoded(pair.substring(equals + 1)));
            times.merge(name, 1, Integer::sum);
        }
        return new QueryString(firstValues, times);
    }

    /** The first value of parameter {@code name}, or null. */
    public String value(String name) {
        return firstValues.get(name);
    }

    /** How many times parameter {@code name} is given. */
    public int count(String name) {
        return times.getOrDefault(name, 0);
    }

    private static String decoded(String text) {
        if (text.indexOf('%') < 0 && text.indexOf('+') < 0) {
            return text; // nearly every name and value: nothing to decode, and no bytes to check
        }
        if (!RequestLine.escapesWellFormed(text)) {
            throw new BadRequest("the query: bad percent-encoding in \"" + text + "\"");
        }
        String decoded = RequestLine.percentDecoded(text, true);
        if (decoded == null) {
            throw new BadRequest("the query: the escapes of \"" + text + "\" stand for bytes that are not UTF-8");
        }
        return decoded;
    }
}
