package dev.sluice.servlet;

import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.QueryString;
import dev.sluice.server.request.TrustedProxies;
import jakarta.servlet.http.HttpServletRequest;

import java.util.Collections;
import java.util.Map;

/**
 * A servlet request as policies see it. The path is the one inside the application (without its context path):
 * an application deployed under {@code /shop} is matched by {@code path: /api/**} for {@code /shop/api/items}, as
 * the same application behind the gateway would be. Like the gateway, the path is matched as the client wrote it
 * (not percent-decoded), and the {@code ip} is the connection's address unless it is one of the
 * {@code trusted_proxies}, when {@code X-Forwarded-For} names the client.
 */
final class ServletClientRequest implements ClientRequest {
    private final HttpServletRequest request;
    private final TrustedProxies proxies;
    private String ip;
    private Map<String, String> queries;

    ServletClientRequest(HttpServletRequest request, TrustedProxies proxies) {
        this.request = request;
        this.proxies = proxies;
    }

    @Override
    public String method() {
        return request.getMethod();
    }

    @Override
    public String path() {
        String uri = request.getRequestURI();
        String context = request.getContextPath();
        String path = !context.isEmpty() && uri.startsWith(context) ? uri.substring(context.length()) : uri;
        return path.isEmpty() ? "/" : path;
    }

    @Override
    public String host() {
        return ClientRequest.hostWithoutPort(request.getHeader("Host"));
    }

    @Override
    public String ip() {
        if (ip == null) { // once a request, however many policies read it
            ip = proxies.client(request.getRemoteAddr(), Collections.list(request.getHeaders("X-Forwarded-For")));
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
            queries = QueryString.parse(request.getQueryString());
        }
        return queries.get(name);
    }
}
