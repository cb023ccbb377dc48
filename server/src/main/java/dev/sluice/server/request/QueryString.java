package dev.sluice.server.request;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * The parameters of a query string ({@code page=2&user=u%201}): split on {@code &}, names and values
 * percent-decoded, names compared exactly, the first of repeated names kept. The gateway and
 * {@code /v1/check-request} both read queries here, so the same request gets the same key from both.
 */
public final class QueryString {
    private QueryString() {
    }

    /** The parameters of {@code query} (null or empty: none); bad percent-encoding is a {@link BadRequest}. */
    public static Map<String, String> parse(String query) {
        Map<String, String> parameters = new HashMap<>();
        if (query == null || query.isEmpty()) {
            return parameters;
        }
        for (String pair : query.split("&")) {
            if (pair.isEmpty()) {
                continue;
            }
            int equals = pair.indexOf('=');
            String name = decoded(equals < 0 ? pair : pair.substring(0, equals));
            parameters.putIfAbsent(name, equals < 0 ? "" : decoded(pair.substring(equals + 1)));
        }
        return parameters;
    }

    private static String decoded(String text) {
        try {
            return URLDecoder.decode(text, StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            throw new BadRequest("the query: bad percent-encoding in \"" + text + "\"");
        }
    }
}
