package dev.sluice.server.http;

import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.ReceivedRequest;
import dev.sluice.server.request.TrustedProxies;
import io.vertx.core.http.HttpServerRequest;

import java.util.List;

/** A request the gateway is about to forward, as its policies see it. */
final class ProxiedRequest extends ReceivedRequest {
    private final HttpServerRequest request;
    private String path;

    ProxiedRequest(HttpServerRequest request, TrustedProxies proxies) {
        super(proxies);
        this.request = request;
    }

    @Override
    public String method() {
        return request.method().name();
    }

    @Override
    public String path() {
        if (path == null) {
            path = ClientRequest.servedPath(request.path());
        }
        return path;
    }

    @Override
    public String header(String name) {
        return request.getHeader(name);
    }

    @Override
    protected String remoteAddress() {
        return request.remoteAddress() == null ? "" : request.remoteAddress().hostAddress();
    }

    @Override
    protected List<String> forwardedFor() {
        return request.headers().getAll("X-Forwarded-For");
    }

    @Override
    protected String rawQuery() {
        return request.query();
    }
}
