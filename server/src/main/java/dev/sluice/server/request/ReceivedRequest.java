package dev.sluice.server.request;

import java.util.List;
import java.util.Map;

/**
 * An HTTP request received on a connection, by the gateway or by the servlet filter: the client is the connection's
 * address, or the one {@code X-Forwarded-For} names when that address is a trusted proxy, and the query is parsed
 * once, both worked out the first time a policy reads them, whatever the server that received the request.
 */
public abstract class ReceivedRequest implements ClientRequest {
    private final TrustedProxies proxies;
    private String ip;
    private Map<String, String> queries;

    protected ReceivedRequest(TrustedProxies proxies) {
        this.proxies = proxies;
    }

    /** The address at the other end of the connection ({@code ""} when it is not known). */
    protected abstract String remoteAddress();

    /** Every {@code X-Forwarded-For} header of the request, in order (none: empty). */
    protected abstract List<String> forwardedFor();

    /** The query as the client wrote it, or null. */
    protected abstract String rawQuery();

    @Override
    public final String ip() {
        if (ip == null) {
            ip = proxies.client(remoteAddress(), forwardedFor());
        }
        return ip;
    }

    @Override
    public final String query(String name) {
        if (queries == null) {
            queries = QueryString.parse(rawQuery());
        }
        return queries.get(name);
    }
}
