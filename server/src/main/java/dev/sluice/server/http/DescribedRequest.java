package dev.sluice.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.ClientRequest;
import dev.sluice.server.request.HeaderText;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.QueryString;
import dev.sluice.server.request.RequestLine;
import dev.sluice.server.request.TrustedProxies;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The HTTP request described by the body of {@code POST /v1/check-request}:
 * {@code {"method":"GET","path":"/api/items?page=2","host":"api.example.com","ip":"10.0.0.7","headers":{"X-API-Key":"k1"}}}.
 * The caller has already found the client, so {@code ip} is taken as given. A malformed field is a
 * {@link BadRequest} that names it. The query is read only when a policy's key reads it, as the gateway reads it:
 * bad percent-encoding in a query no key reads is forwarded by the gateway, so it is no error here either (a
 * difference found by checking the docs against both).
 */
final class DescribedRequest implements ClientRequest {
    private static final Set<String> FIELDS = Set.of("method", "path", "host", "ip", "headers");
    private final String method;
    private final String path;
    private final String host;
    private final String ip;
    private final Map<String, String> headers;
    /** The query as written, or null; parsed the first time a key reads it. */
    private final String rawQuery;
    private QueryString queries;

    private DescribedRequest(String method, String path, String host, String ip, Map<String, String> headers,
                             String rawQuery) {
        this.method = method;
        this.path = path;
        this.host = host;
        this.ip = ip;
        this.headers = headers;
        this.rawQuery = rawQuery;
    }

    static DescribedRequest of(JsonNode body) {
        for (Iterator<String> names = body.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!FIELDS.contains(name)) {
                throw new BadRequest("unknown field \"" + name + "\": expected method, path, host, ip and headers");
            }
        }
        String method = text(body, "method", true);
        // a method as the gateway takes one: an HTTP token (M-SEARCH) with no small letter (a review found M-SEARCH
        // refused here and decided there)
        if (!KeyPart.NAME.matcher(method).matches() || !method.equals(method.toUpperCase(Locale.ROOT))) {
            throw new BadRequest("method: expected an HTTP method in capitals, such as GET, got \"" + method + "\"");
        }
        String target = text(body, "path", true);
        if (!target.startsWith("/")) {
            throw new BadRequest("path: expected a path that starts with /, got \"" + target + "\"");
        }
        int question = target.indexOf('?');
        String rawPath = question < 0 ? target : target.substring(0, question);
        if (target.indexOf('#') >= 0) { // as the gateway: no fragment in a request
            throw new BadRequest("path: a # (a fragment) has no place in a request, in \"" + target + "\"");
        }
        if (rawPath.indexOf('\\') >= 0) {
            throw new BadRequest("path: " + RequestLine.BACKSLASH + ", in \"" + target + "\"");
        }
        if (!RequestLine.escapesWellFormed(rawPath)) {
            // the gateway and the servlet filter answer such a target 400 before deciding it, and so does this (a
            // review found it decided, and charged, here)
            throw new BadRequest("path: a % that is not followed by two hex digits, in \"" + target + "\"");
        }
        String path = RequestLine.servedPath(rawPath);
        String rawQuery = question < 0 ? null : target.substring(question + 1);
        Map<String, String> headers = new HashMap<>();
        JsonNode headerNode = body.get("headers");
        if (headerNode != null && !headerNode.isNull()) {
            if (!headerNode.isObject()) {
                throw new BadRequest("headers: expected an object of header names and string values");
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = headerNode.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> header = it.next();
                if (!header.getValue().isTextual()) {
                    throw new BadRequest("headers." + header.getKey() + ": expected a string, got " + header.getValue());
                }
                if (header.getKey().isEmpty()) {
                    throw new BadRequest("headers: a header name must not be empty");
                }
                if (!KeyPart.NAME.matcher(header.getKey()).matches()) {
                    // no HTTP request carries such a name: "X-API-Key " would quietly key on nothing, and lower-casing
                    // made the Kelvin sign of "X-API-\u212Aey" a k (a review found both)
                    throw new BadRequest("headers." + header.getKey() + ": not an HTTP header name (letters, digits and"
                            + " RFC 9110's token marks only)");
                }
                // names are case-insensitive: two spellings of one name would be one header given twice, which
                // a policy could not tell apart (the gateway refuses a cost header given twice alike)
                String name = header.getKey().toLowerCase(Locale.ROOT);
                String before = headers.putIfAbsent(name, header.getValue().asText());
                if (before != null) {
                    throw new BadRequest("headers." + header.getKey() + ": the header is given twice (header names"
                            + " are case-insensitive)");
                }
            }
        }
        String host = text(body, "host", false);
        if (host == null) {
            host = headers.get("host");
        }
        String ip = text(body, "ip", false);
        if (ip != null && !TrustedProxies.isAddress(TrustedProxies.unbracketed(ip))) {
            throw new BadRequest("ip: expected an IP address such as 10.0.0.7, got \"" + ip + "\"");
        }
        ip = TrustedProxies.canonical(ip); // the key the gateway and the servlet filter give the same client
        return new DescribedRequest(method, path, HeaderText.hostWithoutPort(host),
                ip, headers, rawQuery);
    }

    private static String text(JsonNode body, String field, boolean required) {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) {
            if (required) {
                throw new BadRequest(field + ": missing");
            }
            return null;
        }
        if (!node.isTextual()) {
            throw new BadRequest(field + ": expected a string, got " + node);
        }
        return node.asText();
    }

    @Override
    public String method() {
        return method;
    }

    @Override
    public String path() {
        return path;
    }

    @Override
    public String host() {
        return host;
    }

    @Override
    public String ip() {
        return ip;
    }

    @Override
    public String header(String name) {
        return headers.get(name.toLowerCase(Locale.ROOT));
    }

    @Override
    public String query(String name) {
        return queries().value(name);
    }

    @Override
    public int queryCount(String name) {
        return queries().count(name);
    }

    private QueryString queries() {
        if (queries == null) {
            queries = QueryString.parse(rawQuery);
        }
        return queries;
    }
}
