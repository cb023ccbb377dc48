package dev.sluice.server.request;

/**
 * What a policy may look at in an HTTP request: the gateway reads it off the request it proxies,
 * {@code POST /v1/check-request} off the JSON that describes one.
 */
public interface ClientRequest {
    /** In capitals: {@code GET}. */
    String method();

    /** Without the query: {@code /api/items}. */
    String path();

    /** The Host without its port, in lower case, or null when the request has none. */
    String host();

    /** The client's address, after {@code X-Forwarded-For} from trusted proxies. */
    String ip();

    /** The first value of a header (names compare ignoring case), or null. */
    String header(String name);

    /** The first value of a query parameter, or null. */
    String query(String name);

    /** {@code api.example.com:8443} → {@code api.example.com}; {@code [::1]:80} → {@code [::1]}. */
    static String hostWithoutPort(String host) {
        if (host == null || host.isEmpty()) {
            return null;
        }
        int colon = host.lastIndexOf(':');
        if (colon > host.lastIndexOf(']')) {
            host = host.substring(0, colon);
        }
        return host.toLowerCase(java.util.Locale.ROOT);
    }
}
