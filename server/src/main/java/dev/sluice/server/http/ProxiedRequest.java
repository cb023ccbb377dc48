package dev.sluice.server.http;

import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.HeaderText;
import dev.sluice.server.request.ReceivedRequest;
import dev.sluice.server.request.RequestLine;
import dev.sluice.server.request.TrustedProxies;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;

import java.util.List;

/**
 * A request the gateway is about to forward, as its policies see it: its path, headers and query as the client
 * meant them ({@link HeaderText#asSent}), the same as {@code /v1/check-request} describes them.
 */
final class ProxiedRequest extends ReceivedRequest {
    private final HttpServerRequest request;
    private String path;
    /** The options of the request's Connection headers, once a policy has read a header. */
    private String[] named;

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
            path = RequestLine.servedPath(HeaderText.asSent(request.path()));
        }
        return path;
    }

    /**
     * The first value of the header as the upstream gets it: none for a hop-by-hop header, or one the request's
     * {@code Connection} names, which the gateway takes off. A review sent {@code X-API-Key: <new each time>} with
     * {@code Connection: X-API-Key}: the policy keyed by it charged a fresh key, and the upstream served the
     * request as anonymous, past every limit.
     */
    @Override
    public String header(String name) {
        return goesOn(name) ? HeaderText.headerAsSent(name, request.getHeader(name)) : null;
    }

    @Override
    public int headerCount(String name) {
        return goesOn(name) ? request.headers().getAll(name).size() : 0;
    }

    /** Whether the header {@code name} goes upstream; the request's Connection options read once. */
    private boolean goesOn(String name) {
        if (named == null) { // no list made for a request without a Connection header (HTTP/2's, most of HTTP/1.1's)
            named = request.headers().contains(io.vertx.core.http.HttpHeaders.CONNECTION)
                    ? Forwarder.options(request.headers().getAll(io.vertx.core.http.HttpHeaders.CONNECTION))
                    : Forwarder.NONE;
        }
        return Forwarder.goesOn(name, named);
    }

    /**
     * Refuses, before anything is decided, a request whose meaning a server could read otherwise than the policies
     * would, as nginx refuses it with a 400: one Host header exactly (none only before HTTP/1.1), a target from the
     * root ({@code OPTIONS *} aside), in ASCII, and escapes of two hex digits; a method in capitals. Charged as
     * {@code api/x} or {@code /%zz}, such a request could be served as something else. Two past bugs a review
     * found: a target in absolute form ({@code http://other.example/api/x}) was matched on its path and the Host
     * header, while the upstream takes the target's host over the header (RFC 9112 §3.2.2); and {@code get}
     * matched no {@code methods: [GET]} policy, while many frameworks serve it as GET.
     */
    /** A Host header's value (RFC 9110 7.2: uri-host [":" port]), empty included, which HTTP allows. */
    private static final java.util.regex.Pattern HOST = java.util.regex.Pattern.compile(
            "(?:\\[[0-9A-Fa-f:.]+]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]*)?");

    static void checkWellFormed(HttpServerRequest request) throws BadRequest {
        List<String> hosts = request.headers().getAll("Host");
        if (hosts.size() > 1) {
            throw new BadRequest("header Host: given " + hosts.size() + " times; a request names one host");
        }
        if (hosts.isEmpty() && request.version() == HttpVersion.HTTP_1_1) {
            throw new BadRequest("header Host: missing; an HTTP/1.1 request names its host");
        }
        if (!hosts.isEmpty() && !HOST.matcher(hosts.get(0)).matches()) {
            // a server must refuse a Host that is no host and port (RFC 9112 3.2): "api.example.com, evil" matched no
            // policy for api.example.com and went on as it was, and so did a Host folded over two lines (a review)
            throw new BadRequest("header Host: \"" + hosts.get(0) + "\" is no host and port, such as"
                    + " api.example.com:8443");
        }
        RequestLine.checkMethod(request.method().name());
        String path = request.path();
        if ((path == null || !request.uri().startsWith("/"))
                && !(request.method() == HttpMethod.OPTIONS && "*".equals(request.uri()))) {
            throw new BadRequest("request target \"" + request.uri() + "\": expected a path from the root, such as /api/items");
        }
        RequestLine.checkTarget(path == null ? "" : path, request.uri());
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
        return HeaderText.asSent(request.query());
    }
}
