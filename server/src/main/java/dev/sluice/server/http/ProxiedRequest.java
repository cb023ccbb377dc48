package dev.sluice.server.http;

import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.QueryString;
import dev.sluice.server.request.TrustedProxies;
import io.vertx.core.http.HttpServerRequest;

import java.util.Map;

/** A request the gateway is about to forward, as its policies see it. */
final class ProxiedRequest implements ClientRequest {
    private final HttpServerRequest request;
    private final TrustedProxies proxies;
    private String ip;
    private Map<String, String> queries;

    ProxiedRequest(HttpServerRequest request, TrustedProxies proxies) {
        this.request = request;
        this.proxies = proxies;
    }

    @Override
    public String method() {
        return request.method().name();
    }

    @Override
    public String path() {
        return request.path();
    }

    @Override
    public String host() {
        return ClientRequest.hostWithoutPort(request.getHeader("Host"));
    }

    @Override
    public String ip() {
        if (ip == null) {
            String remote = request.remoteAddress() == null ? "" : request.remoteAddress().hostAddress();
            ip = proxies.client(remote, request.headers().getAll("X-Forwarded-For"));
        }
        return ip;
    }

    @Override
    public String header(String name) {
        return request.getHeader(name);
    }

    @Override
    public String query(String name) {
        if (queries == null) {
            queries = QueryString.parse(request.query());
        }
        return queries.get(name);
    }
}
