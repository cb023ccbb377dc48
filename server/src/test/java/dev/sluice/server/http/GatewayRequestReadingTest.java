package dev.sluice.server.http;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.charset.StandardCharsets;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Requests the gateway reads one way only, or refuses: a request that another server could read another way (its
 * target, its length, its version) is answered 400 and never forwarded, so that no policy can be passed by a request
 * the upstream reads otherwise.
 */
class GatewayRequestReadingTest extends GatewayFixture {
    /** A bypass a review found: Jetty served /api;x%2F../items as /api/items, which Sluice read as /items. */
    @Test
    void aPathWhoseParameterHoldsAnEscapedSlashIsRefusedNotForwarded() throws Exception {
        HttpResponse<String> refused = send(request("/api;x%2F../items").header("X-User", "alice"));
        assertThat(refused.statusCode()).isEqualTo(400);
        assertThat(JSON.readTree(refused.body()).get("error").asText()).isEqualTo("path \"/api;x%2F../items\": a ';'"
                + " parameter holds an escaped slash, which servers read two ways (a servlet container cuts the parameter"
                + " before decoding, others decode first): refused as ambiguous");
        assertThat(upstream.requests.get()).isZero();
    }

    /** What the HTTP decoder cannot read is a 400 (431 for headers too large) that says why, not an empty answer. */
    @Test
    void aRequestTheDecoderCannotReadIsToldWhy() throws Exception {
        String badLength = raw("GET /api/items HTTP/1.1\r\nHost: a\r\nContent-Length: abc");
        assertThat(badLength).startsWith("HTTP/1.1 400 ");
        assertThat(JSON.readTree(badLength.substring(badLength.indexOf("\r\n\r\n") + 4)).get("error").asText())
                .startsWith("malformed request: ");
        String huge = raw("GET /api/items HTTP/1.1\r\nHost: a\r\nX-Big: " + "x".repeat(20_000));
        assertThat(huge).startsWith("HTTP/1.1 431 ");
        assertThat(JSON.readTree(huge.substring(huge.indexOf("\r\n\r\n") + 4)).get("error").asText())
                .startsWith("malformed request: ");
        assertThat(upstream.requests.get()).isZero();
    }

    /**
     * A version the server does not speak is answered in its own, HTTP/1.1 (a review found {@code HTTP/1.2 400} and
     * {@code HTTP/2.0 400} sent back); a client speaking HTTP/2 from its first byte (h2c with prior knowledge) is
     * answered in HTTP/2, {@code SETTINGS} then {@code GOAWAY} with {@code HTTP_1_1_REQUIRED}, where an HTTP/1.1 text
     * was read as an empty reply (the same review). The API shares these rules.
     */
    @Test
    void aVersionNotSpokenIsAnsweredInHttp11AndHttp2IsToldToUseIt() throws Exception {
        for (String version : List.of("HTTP/1.2", "HTTP/2.0", "HTTP/9.9")) {
            String answer = raw("GET /api/items " + version + "\r\nHost: a");
            assertThat(answer).as(version).startsWith("HTTP/1.1 400 ");
            assertThat(JSON.readTree(answer.substring(answer.indexOf("\r\n\r\n") + 4)).get("error").asText())
                    .isEqualTo("malformed request: request line: HTTP version written otherwise than HTTP/1.1 or"
                            + " HTTP/1.0 (read as " + version + ")");
        }
        byte[] frames;
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", gateway.port())) {
            socket.setSoTimeout(10_000);
            socket.getOutputStream().write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            // the client's SETTINGS follow its preface: nothing the server reads
            socket.getOutputStream().write(new byte[] {0, 0, 0, 4, 0, 0, 0, 0, 0});
            frames = socket.getInputStream().readAllBytes();
        }
        java.nio.ByteBuffer read = java.nio.ByteBuffer.wrap(frames);
        assertThat(frames.length).isGreaterThan(9 + 9 + 8);
        assertThat(read.getInt()).as("an empty SETTINGS frame").isEqualTo(4); // length 0, type 4
        assertThat(read.get()).isZero(); // flags
        assertThat(read.getInt()).isZero(); // stream 0
        int length = read.getInt() >>> 8;
        read.position(read.position() - 1);
        assertThat(read.get()).as("a GOAWAY frame").isEqualTo((byte) 7);
        assertThat(read.get()).isZero();
        assertThat(read.getInt()).isZero();
        assertThat(read.getInt()).as("last stream").isZero();
        assertThat(read.getInt()).as("HTTP_1_1_REQUIRED").isEqualTo(0xd);
        assertThat(new String(frames, read.position(), length - 8, StandardCharsets.US_ASCII))
                .isEqualTo("this server speaks HTTP/1.1; send HTTP/1.1, or ask to upgrade");
        assertThat(read.position() + length - 8).as("nothing after it").isEqualTo(frames.length);
        assertThat(upstream.requests.get()).isZero();
    }

    /** What a server could read otherwise than the policies would is refused before it is decided, as nginx does. */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "no Host|GET /api/items HTTP/1.1|header Host: missing; an HTTP/1.1 request names its host",
            "two Hosts|GET /api/items HTTP/1.1\\r\\nHost: a\\r\\nHost: b|header Host: given 2 times; a request names one host",
            "a Host that is no host|GET /api/items HTTP/1.1\\r\\nHost: api.example.com, evil|header Host: \"api.example.com, evil\" is no host and port, such as api.example.com:8443",
            "a Host folded|GET /api/items HTTP/1.1\\r\\nHost: x\\r\\n X-User: d6|header Host: \"x X-User: d6\" is no host and port, such as api.example.com:8443",
            "a relative target|GET api/items HTTP/1.1\\r\\nHost: a|request target \"api/items\": expected a path from the root, such as /api/items",
            "an asterisk|GET * HTTP/1.1\\r\\nHost: a|request target \"*\": expected a path from the root, such as /api/items",
            "an absolute target|GET http://other.example/api/items HTTP/1.1\\r\\nHost: a|request target \"http://other.example/api/items\": expected a path from the root, such as /api/items",
            "a method in lower case|get /api/items HTTP/1.1\\r\\nHost: a|method \"get\": methods are written in capitals, as GET",
            "a method in mixed case|Post /api/items HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 0|method \"Post\": methods are written in capitals, as GET",
            "a broken escape|GET /api/%zz HTTP/1.1\\r\\nHost: a|request target \"/api/%zz\": a % that is not followed by two hex digits",
    })
    void refusesARequestThatCouldBeReadAnotherWay(String problem, String head, String message) throws Exception {
        String answer = raw(head.replace("\\r\\n", "\r\n") + "\r\nX-User: raw");
        assertThat(answer).startsWith("HTTP/1.1 400 ");
        assertThat(JSON.readTree(answer.substring(answer.indexOf("\r\n\r\n") + 4)).get("error").asText()).isEqualTo(message);
        assertThat(upstream.requests.get()).as("never forwarded").isZero();
    }

    /**
     * A body that could be delimited two ways is refused with a 400 that says why, and nothing after it on its
     * connection is read, as RFC 9112 §6.1 and §6.3 ask and nginx does. Past bugs, found by trying the gateway:
     * Netty's decoder read no body for {@code Transfer-Encoding: xchunked}, so the body, a request of its own, was
     * forwarded as one; it dropped a {@code Content-Length} sent with {@code chunked} and read on; it forwarded
     * {@code gzip, chunked} as {@code chunked}; and it took {@code chunked} from an HTTP/1.0 client.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "a coding not chunked|POST /api/x HTTP/1.1|Transfer-Encoding: xchunked|header Transfer-Encoding: \"xchunked\": chunked alone is taken",
            "identity|POST /api/x HTTP/1.1|Transfer-Encoding: identity|header Transfer-Encoding: \"identity\": chunked alone is taken",
            "two codings|POST /api/x HTTP/1.1|Transfer-Encoding: gzip, chunked|header Transfer-Encoding: \"gzip, chunked\": chunked alone is taken",
            "chunked twice|POST /api/x HTTP/1.1|Transfer-Encoding: chunked\\r\\nTransfer-Encoding: chunked|header Transfer-Encoding: \"chunked, chunked\": chunked alone is taken",
            "a length too|POST /api/x HTTP/1.1|Content-Length: 5\\r\\nTransfer-Encoding: chunked|headers Content-Length and Transfer-Encoding together: a body is delimited one way",
            "HTTP/1.0|POST /api/x HTTP/1.0|Transfer-Encoding: chunked|header Transfer-Encoding in an HTTP/1.0 request, which has no such framing",
            "two lengths in HTTP/1.0|POST /api/x HTTP/1.0|Content-Length: 0\\r\\nContent-Length: 5|header Content-Length: given 2 times; a body is delimited one way",
            "HTTP/1.0 in lower case|POST /api/x http/1.0|Transfer-Encoding: chunked|request line: HTTP version written otherwise than HTTP/1.1 or HTTP/1.0 (read as HTTP/1.0)",
            "HTTP/1.00|POST /api/x HTTP/1.00|Transfer-Encoding: chunked|request line: HTTP version written otherwise than HTTP/1.1 or HTTP/1.0 (read as HTTP/1.0)",
    })
    void aBodyThatCouldBeDelimitedTwoWaysIsRefusedAndNothingAfterItRead(String problem, String line, String framing,
                                                                        String message) throws Exception {
        String sent = line + "\r\nHost: a\r\nX-User: smuggler\r\n" + framing.replace("\\r\\n", "\r\n") + "\r\n\r\n"
                + "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
        String answer;
        try (java.net.Socket socket = rawClient()) {
            socket.getOutputStream().write(sent.getBytes(StandardCharsets.ISO_8859_1));
            answer = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8); // until it is closed
        }
        assertThat(answer).matches("(?s)HTTP/1\\.[01] 400 .*");
        assertThat(answer.split("\r\n\r\n", -1)).as("one answer, a head and its body").hasSize(2);
        assertThat(JSON.readTree(answer.substring(answer.indexOf("\r\n\r\n") + 4)).get("error").asText())
                .isEqualTo("malformed request: " + message);
        assertThat(upstream.requests.get()).as("neither the request nor what followed it forwarded").isZero();
        assertThat(send(request("/api/x").header("X-User", "smuggler")).statusCode()).as("never charged").isEqualTo(200);
    }

    /**
     * A chunked body that breaks off unreadable ends its connection at once, whether its request came first on its
     * connection or waited behind another: one that waited is decided in its turn, on its head, as one that came first
     * is (nginx's limit_req decides before it reads a body), and nothing is logged. A past bug, found by trying the
     * gateway: behind another, Vert.x failed on it (a NullPointerException in the log), and the request was decided,
     * forwarded, and held until the upstream timeout.
     */
    @Test
    void anUnreadableChunkEndsItsConnectionAtOnce() throws Exception {
        try (dev.sluice.testkit.LogCapture netty = dev.sluice.testkit.LogCapture.of("io.netty");
             dev.sluice.testkit.LogCapture vertx = dev.sluice.testkit.LogCapture.of("io.vertx")) {
            for (String before : List.of("", "GET /hold?ms=300 HTTP/1.1\r\nHost: a\r\n\r\n")) {
                long started = System.nanoTime();
                try (java.net.Socket client = rawClient()) {
                    client.getOutputStream().write((before + "POST /api/" + (before.isEmpty() ? "first" : "waiting")
                            + " HTTP/1.1\r\nHost: a\r\nX-User: chunky" + before.length() + "\r\n"
                            + "Transfer-Encoding: chunked\r\n\r\nzz\r\n").getBytes(StandardCharsets.US_ASCII));
                    try {
                        client.getInputStream().readAllBytes();
                    } catch (java.net.SocketException reset) {
                        // cut with an answer unread
                    }
                }
                assertThat(Duration.ofNanos(System.nanoTime() - started)).as("ended at once, not at a timeout")
                        .isLessThan(Duration.ofSeconds(5));
                String user = "chunky" + before.length();
                assertThat(send(request("/api/x").header("X-User", user)).statusCode()).as("charged once").isEqualTo(200);
                assertThat(send(request("/api/x").header("X-User", user)).statusCode()).isEqualTo(429);
            }
            assertThat(netty.messages()).isEmpty();
            assertThat(vertx.messages()).isEmpty();
        }
    }

    /**
     * Bugs found by trying the gateway: escapes that are not UTF-8 ({@code %ff}, {@code %fe}) were each read as
     * U+FFFD, one route key and one query key for them all; and a target sent with raw bytes past ASCII reached the
     * upstream changed ({@code /caf\xE9} as {@code /caf\xC3\xA9}), as the decoder reads a byte a char and the
     * encoder writes chars as UTF-8. Each is a 400 that names it, and nothing is forwarded.
     */
    @Test
    void aTargetThatIsNotAsciiOrWhoseEscapesAreNotUtf8IsRefused() throws Exception {
        assertRefused(raw("GET /caf\u00e9 HTTP/1.1\r\nHost: x"),
                "request target \"/caf\\xE9\": byte 0xE9 is not ASCII; a target sends it escaped, as %E9");
        assertRefused(raw("GET /api/\u00c3\u00a9 HTTP/1.1\r\nHost: x\r\nX-User: u"),
                "request target \"/api/\\xC3\\xA9\": byte 0xC3 is not ASCII; a target sends it escaped, as %C3");
        assertRefused(raw("GET /api/%ff HTTP/1.1\r\nHost: x\r\nX-User: u"),
                "path \"/api/%ff\": its escapes stand for bytes that are not UTF-8");
        assertRefused(raw("GET /q?user=%fe HTTP/1.1\r\nHost: x"),
                "the query: the escapes of \"%fe\" stand for bytes that are not UTF-8");
        assertThat(upstream.requests.get()).as("none forwarded").isZero();
        assertThat(send(request("/api/caf%C3%A9").header("X-User", "u")).statusCode()).as("escaped UTF-8").isEqualTo(200);
        assertThat(upstream.seen.get(0).get(":path")).isEqualTo("/api/caf%C3%A9");
    }

    /**
     * A bypass a review found: a # in a target was path to Sluice (Vert.x cuts a path at ? only), so
     * /api/items#/../../public was decided as /public, while the upstreams that drop a fragment serve /api/items; and
     * ?user=K#1 counted apart from ?user=K#2. A 400, nothing forwarded.
     */
    @Test
    void aTargetWithAFragmentIsRefused() throws Exception {
        assertRefused(raw("GET /api/items#/../../public HTTP/1.1\r\nHost: x\r\nX-User: u"),
                "request target \"/api/items#/../../public\": a # (a fragment) has no place in a request; a target"
                        + " sends it escaped, as %23");
        assertRefused(raw("GET /q?user=K#1 HTTP/1.1\r\nHost: x"),
                "request target \"/q?user=K#1\": a # (a fragment) has no place in a request; a target sends it"
                        + " escaped, as %23");
        assertThat(upstream.requests.get()).as("none forwarded").isZero();
        assertThat(send(request("/q?user=K%231")).statusCode()).as("escaped, it is a character").isEqualTo(200);
    }

    /**
     * A bypass a review found: a \ in a path was a character of its segment to Sluice, so /x/..\api/items was no
     * path of /api/**, while the upstreams that parse URLs as browsers do (Node's new URL, Deno, Bun) read \ as /
     * and served /api/items. A 400, nothing forwarded; escaped, %5C, it is a character.
     */
    @Test
    void aBackslashInAPathIsRefused() throws Exception {
        assertRefused(raw("GET /x/..\\api/items HTTP/1.1\r\nHost: x\r\nX-User: u"),
                "request target \"/x/..\\api/items\": a \\ has no place in a path; some servers read it as /, so a"
                        + " target sends it escaped, as %5C");
        assertThat(upstream.requests.get()).as("none forwarded").isZero();
        assertThat(send(request("/q%5Cr?user=K")).statusCode()).as("escaped, it is a character").isEqualTo(200);
    }

    /**
     * Hop-by-hop headers (RFC 9110 §7.6.1), the standard ones and those a Connection header names, stay on their
     * own hop both ways; the others pass, Host unchanged, even when a Connection header names it.
     */
    @Test
    void hopByHopHeadersStayOnTheirHop() throws Exception {
        String answer;
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", gateway.port())) {
            socket.setSoTimeout(10_000);
            socket.getOutputStream().write(("GET /hop HTTP/1.1\r\nHost: example.test\r\nConnection: close, X-Secret-Hop\r\n"
                    + "X-Secret-Hop: 1\r\nConnection: X-Other-Hop\r\nX-Other-Hop: 2\r\nKeep-Alive: timeout=9\r\nTE: trailers\r\n"
                    // a review found Host taken off when named, and the upstream's own put in its place
                    + "Connection: Host\r\n"
                    + "Proxy-Authorization: Basic eDp5\r\n"
                    + "X-Kept: yes\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            java.io.ByteArrayOutputStream read = new java.io.ByteArrayOutputStream();
            try {
                socket.getInputStream().transferTo(read);
            } catch (java.net.SocketTimeoutException e) {
                throw new AssertionError("not closed after Connection: close; read " + read, e);
            }
            answer = read.toString(java.nio.charset.StandardCharsets.UTF_8);
        }
        Map<String, String> seen = upstream.seen.get(0);
        assertThat(seen).containsEntry("x-kept", "yes").containsEntry("host", "example.test")
                .doesNotContainKeys("x-secret-hop", "x-other-hop", "keep-alive", "te", "proxy-authorization");
        assertThat(answer).startsWith("HTTP/1.1 200 ").endsWith("hop");
        String head = answer.substring(0, answer.indexOf("\r\n\r\n")).toLowerCase(java.util.Locale.ROOT);
        assertThat(head).contains("\r\nx-upstream-kept: yes", "\r\nconnection: close")
                .doesNotContain("x-up-hop", "proxy-authenticate", "keep-alive");
    }

    /**
     * An HTTP/1.0 client, without Host: the upstream gets an HTTP/1.1 request naming the upstream's host, and an
     * answer of unknown length reaches the client whole, ended by the connection's close.
     */
    @Test
    void anHttp10ClientWithoutHostIsForwardedAndAnsweredWhole() throws Exception {
        upstream.dripRest.countDown();
        for (String path : List.of("/drip", "/download?bytes=100000", "/elsewhere")) {
            byte[] answer;
            try (java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port())) {
                client.setSoTimeout(10_000);
                client.getOutputStream().write(("GET " + path + " HTTP/1.0\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                answer = client.getInputStream().readAllBytes();
            }
            String text = new String(answer, StandardCharsets.ISO_8859_1);
            assertThat(text).as(path).startsWith("HTTP/1.0 200 ");
            String body = text.substring(text.indexOf("\r\n\r\n") + 4);
            switch (path) {
                case "/drip" -> assertThat(body).isEqualTo("firstrest");
                case "/elsewhere" -> assertThat(body).isEqualTo("hello");
                default -> {
                    byte[] expected = new byte[100_000];
                    for (int i = 0; i < expected.length; i++) {
                        expected[i] = Upstream.pattern(i);
                    }
                    assertThat(body).isEqualTo(new String(expected, StandardCharsets.ISO_8859_1));
                }
            }
        }
        assertThat(upstream.seen).allSatisfy(seen -> assertThat(seen).containsEntry("host", "127.0.0.1:" + upstream.port()));
        // one that asks to keep its connection: an answer of unknown length can only end with it (a review found it hang)
        try (java.net.Socket client = new java.net.Socket("127.0.0.1", gateway.port())) {
            client.setSoTimeout(10_000);
            client.getOutputStream().write("GET /drip HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            String text = new String(client.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
            assertThat(text).startsWith("HTTP/1.0 200 ").endsWith("\r\n\r\nfirstrest");
        }
    }
}
