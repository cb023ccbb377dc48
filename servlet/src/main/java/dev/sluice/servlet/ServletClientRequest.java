package dev.sluice.servlet;

import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.HeaderText;
import dev.sluice.server.request.ReceivedRequest;
import dev.sluice.server.request.RequestLine;
import dev.sluice.server.request.TrustedProxies;
import jakarta.servlet.http.HttpServletRequest;

import java.util.Collections;
import java.util.List;

/**
 * A servlet request as policies see it. The path is the one inside the application (without its context path):
 * an application deployed under {@code /shop} is matched by {@code path: /api/**} for {@code /shop/api/items}, as
 * the same application behind the gateway would be. Like the gateway, the path is matched as served
 * ({@link ClientRequest#servedPath}: decoded, slashes merged, dot segments resolved), and the {@code ip} is the
 * connection's address unless it is one of the
 * {@code trusted_proxies}, when {@code X-Forwarded-For} names the client. A container that reads the request's
 * head one char per byte, as Jetty and Tomcat do, has what was sent in UTF-8 read as UTF-8
 * ({@link ClientRequest#asSent}).
 */
final class ServletClientRequest extends ReceivedRequest {
    private final HttpServletRequest request;

    /**
     * Refuses, as the gateway does, a target whose path has a {@code %} not followed by two hex digits or that has a
     * byte past ASCII: a container set to be lenient passes them on, and the filter charged them (from a review).
     */
    ServletClientRequest(HttpServletRequest request, TrustedProxies proxies) throws BadRequest {
        super(proxies);
        this.request = request;
        String path = request.getRequestURI();
        String query = request.getQueryString();
        String target = query == null ? path : path + "?" + query;
        for (int i = 0; i < target.length(); i++) {
            if (target.charAt(i) >= 0x7F) { // refused below, shown as the bytes sent, as the gateway shows them,
                // whether the container read each byte as a char or the whole as UTF-8
                target = new String(HeaderText.asSent(target).getBytes(java.nio.charset.StandardCharsets.UTF_8),
                        java.nio.charset.StandardCharsets.ISO_8859_1);
                break;
            }
        }
        RequestLine.checkTarget(path, target);
        RequestLine.checkMethod(request.getMethod()); // as the gateway (a review found get let by undecided)
    }

    @Override
    public String method() {
        return request.getMethod();
    }

    @Override
    public String path() {
        // served whole, then the context path taken off, itself as served: a past bug took it off the URI as
        // written, so /%73hop/api/items or /./shop/api/items kept their /shop and escaped a policy for /api/**
        String uri = RequestLine.servedPath(HeaderText.asSent(request.getRequestURI()));
        String context = request.getContextPath();
        String path;
        if (context.isEmpty()) {
            path = uri;
        } else {
            String served = RequestLine.servedPath(HeaderText.asSent(context));
            served = served.endsWith("/") ? served.substring(0, served.length() - 1) : served;
            path = uri.equals(served) ? "/" : uri.startsWith(served + "/") ? uri.substring(served.length()) : uri;
        }
        return welcomed(path);
    }

    /**
     * A directory's path as the container serves it: Tomcat maps {@code /} to a welcome file itself, a servlet's
     * ({@code /login}) among them, and that servlet then runs on a request whose path is {@code /}; a policy for
     * {@code /login} did not see it (found by trying the filter in Tomcat). The path the container mapped is taken
     * when it is the directory's followed by a file.
     */
    private String welcomed(String path) {
        if (!path.endsWith("/")) {
            return path;
        }
        String mapped = request.getServletPath() + (request.getPathInfo() == null ? "" : request.getPathInfo());
        return mapped.length() > path.length() && mapped.startsWith(path) && mapped.indexOf('/', path.length()) < 0
                ? mapped : path;
    }

    @Override
    public String header(String name) {
        // not headerAsSent: a container (or a wrapper before the filter) may hand over text decoded as UTF-8, José as
        // J o s U+00E9, which that would take for the byte 0xE9 and refuse (a review found it)
        return HeaderText.asSent(request.getHeader(name));
    }

    @Override
    public int headerCount(String name) {
        return Collections.list(request.getHeaders(name)).size();
    }

    /**
     * The user the application authenticated, {@code getUserPrincipal()}: the container's login, or Spring Security's
     * once its filter has run (this filter after it); null for an anonymous request. Never the {@code Authorization}
     * header's, as the gateway reads it: here the application can say who checked out.
     */
    @Override
    public String user() {
        java.security.Principal principal = request.getUserPrincipal();
        return principal == null ? null : principal.getName();
    }

    @Override
    public int userCount() {
        return user() == null ? 0 : 1;
    }

    @Override
    protected String remoteAddress() {
        return request.getRemoteAddr();
    }

    @Override
    protected List<String> forwardedFor() {
        return Collections.list(request.getHeaders("X-Forwarded-For"));
    }

    @Override
    protected String rawQuery() {
        return HeaderText.asSent(request.getQueryString());
    }
}
