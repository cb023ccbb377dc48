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

    /** Without the query, as {@link RequestLine#servedPath} makes it: {@code /api/items}. */
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
        return HeaderText.basicUser(header("Authorization"));
    }

    /** How many times the request gives its user: a user given twice is ambiguous. */
    default int userCount() {
        return headerCount("Authorization");
    }

    /** How many times a query parameter is given: a value that decides (a key) must be given once. */
    default int queryCount(String name) {
        return query(name) == null ? 0 : 1;
    }
}
