package dev.sluice.server.request;

import java.util.List;

/**
 * An HTTP request received on a connection, by the gateway or by the servlet filter, read the same way whatever the
 * server that received it: the host is the Host header's, the client is the connection's address or, when that
 * address is a trusted proxy, the one {@code X-Forwarded-For} names, and the query is parsed once; the client and the
 * query are worked out the first time a policy reads them.
 */
public abstract class ReceivedRequest implements ClientRequest {
    private final TrustedProxies proxies;
    private String ip;
    private QueryString queries;

    protected ReceivedRequest(TrustedProxies proxies) {
        this.proxies = proxies;
    }

    /** The address at the other end of the connection ({@code ""} when it is not known). */
    protected abstract String remoteAddress();

    /** Every {@code X-Forwarded-For} header of the request, in order (none: empty). */
    protected abstract List<String> forwardedFor();

    /** The query as the client wrote it, or null. */
    protected abstract String rawQuery();

    /** The Host header's host, without its port: the same for every server that received the request. */
    @Override
    public final String host() {
        return HeaderText.hostWithoutPort(header("Host"));
    }

    @Override
    public final String ip() {
        if (ip == null) {
            ip = proxies.client(remoteAddress(), forwardedFor());
        }
        return ip;
    }

    @Override
    public final String query(String name) {
        return queries().value(name);
    }

    @Override
    public final int queryCount(String name) {
        return queries().count(name);
    }

    private QueryString queries() {
        if (queries == null) {
            queries = QueryString.parse(rawQuery());
        }
        return queries;
    }
}
