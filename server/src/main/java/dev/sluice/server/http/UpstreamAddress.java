package dev.sluice.server.http;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * Where the gateway forwards: {@code http://host:port} or {@code https://host:port}, no path, query or user.
 *
 * <p>Read from the authority by hand when {@link URI} finds no host in it: {@code URI} takes a name with an
 * {@code _} for no host at all, and a Docker Compose service is often named so ({@code http://my_api:3000}, found
 * by a review: the gateway refused it).
 *
 * @param port the port written, or -1 for the scheme's
 */
public record UpstreamAddress(String host, int port, boolean tls) {
    /**
     * Reads {@code text}.
     *
     * @throws IllegalArgumentException naming it, and what is expected
     */
    public static UpstreamAddress parse(String text) {
        try {
            return of(new URI(text));
        } catch (URISyntaxException | IllegalArgumentException e) {
            throw new IllegalArgumentException("expected http://host:port or https://host:port (no path, query or user), got \"" + text + "\"");
        }
    }

    /** {@code upstream} as an address; an {@link IllegalArgumentException} when it is not one. */
    static UpstreamAddress of(URI upstream) {
        String scheme = upstream.getScheme();
        boolean tls = "https".equalsIgnoreCase(scheme);
        if (!tls && !"http".equalsIgnoreCase(scheme) || upstream.getRawQuery() != null || upstream.getRawFragment() != null
                || !(upstream.getRawPath() == null || upstream.getRawPath().isEmpty() || upstream.getRawPath().equals("/"))) {
            throw new IllegalArgumentException("not an upstream: " + upstream);
        }
        String host = upstream.getHost();
        int port = upstream.getPort();
        if (host == null) { // a registry-based authority to URI: read it as host[:port]
            String authority = upstream.getRawAuthority() == null ? "" : upstream.getRawAuthority();
            int colon = authority.lastIndexOf(':');
            host = colon < 0 ? authority : authority.substring(0, colon);
            String written = colon < 0 ? "" : authority.substring(colon + 1);
            if (!host.matches("[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?") || !written.matches("|[0-9]{1,5}")) {
                throw new IllegalArgumentException("not an upstream: " + upstream);
            }
            port = written.isEmpty() ? -1 : Integer.parseInt(written);
        } else if (upstream.getRawUserInfo() != null) {
            throw new IllegalArgumentException("not an upstream: " + upstream);
        }
        if (port == 0 || port > 65535) {
            throw new IllegalArgumentException("not an upstream: " + upstream);
        }
        return new UpstreamAddress(host, port, tls);
    }

    /** The port connected to: the one written, else the scheme's. */
    int portOrDefault() {
        return port > 0 ? port : tls ? 443 : 80;
    }

    /** The Host header the upstream is sent: as written, the port only if one was. */
    String hostHeader() {
        return port > 0 ? host + ":" + port : host;
    }
}
