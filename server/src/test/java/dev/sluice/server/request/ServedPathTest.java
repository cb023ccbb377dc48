package dev.sluice.server.request;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link RequestLine#servedPath}: the path policies match, as nginx's {@code $uri} would be. */
class ServedPathTest {
    @ParameterizedTest(name = "{0} → {1}")
    @CsvSource(delimiter = '|', value = {
            "/api/items|/api/items",
            "/api/|/api/",
            "/|/",
            "//api/items|/api/items",
            "/api//items//|/api/items/",
            "/./api/items|/api/items",
            "/v1/../api/items|/api/items",
            "/../../api/items|/api/items",
            "/api/items/.|/api/items/",
            "/api/items/..|/api/",
            "/%61pi/items|/api/items",
            "/%2E%2E/api|/api",
            "/api%2Fitems|/api/items",
            "/caf%C3%A9|/café",
            "/100%|/100%",
            "/a%zzb|/a%zzb",
            "/a%4|/a%4",
            "/.well-known/x|/.well-known/x",
            "/a..b/c|/a..b/c",
            "/api;v=1/items|/api/items",
            "/public/..;/api/items|/api/items",
            "/api/items;jsessionid=x|/api/items",
            "/files/a%2Fb;v=1|/files/a/b",
            "/login;v=%41|/login",
            "api/items|/api/items",
            "*|/*",
            "/%\uFF16\uFF11pi|/%\uFF16\uFF11pi",
            "/caf\u00e9/%2e|/caf\u00e9/",
    })
    void isWhatAServerServes(String raw, String served) {
        assertThat(RequestLine.servedPath(raw)).isEqualTo(served);
    }

    /**
     * A bypass a review found: a servlet container cuts {@code ;x%2F..} before decoding and serves {@code /login},
     * while decoded first it is the root, which a policy for {@code /login} does not match. An escaped slash or
     * backslash in a parameter is refused as ambiguous.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"/login;x%2F..", "/login;%2f..", "/login;a=%2F..%2F..", "/api;x%2F../items", "/api;x%5C..%5C/items",
            "/a/login;x%2Fy"})
    void refusesAnEscapedSlashInAParameter(String raw) {
        assertThatThrownBy(() -> RequestLine.servedPath(raw)).isInstanceOf(BadRequest.class)
                .hasMessage("path \"" + raw + "\": a ';' parameter holds an escaped slash, which servers read two ways"
                        + " (a servlet container cuts the parameter before decoding, others decode first): refused as"
                        + " ambiguous");
    }

    /**
     * A bug found by trying the gateway: escapes that stand for bytes that are not UTF-8 were each decoded as
     * U+FFFD, so {@code /api/%ff}, {@code /api/%fe} and {@code /api/%EF%BF%BD} were one path, one route key. They
     * are refused, in a path and in a query; U+FFFD itself, escaped, is still a path.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"/api/%ff", "/api/%fe", "/api/%C0%AF", "/api/%ED%A0%80", "/api/%C3", "/api/%F4%90%80%80"})
    void refusesEscapesThatAreNotUtf8(String raw) {
        assertThatThrownBy(() -> RequestLine.servedPath(raw)).isInstanceOf(BadRequest.class)
                .hasMessage("path \"" + raw + "\": its escapes stand for bytes that are not UTF-8");
        String query = "user=" + raw.substring("/api/".length());
        assertThatThrownBy(() -> QueryString.parse(query)).isInstanceOf(BadRequest.class)
                .hasMessage("the query: the escapes of \"" + query.substring(5) + "\" stand for bytes that are not UTF-8");
        assertThat(RequestLine.servedPath("/api/%EF%BF%BD")).isEqualTo("/api/\uFFFD");
        assertThat(QueryString.parse("user=a+b%20c%C3%A9").value("user")).isEqualTo("a b c\u00e9");
    }

    /** {@link HeaderText#asSent}: what a decoder read one char per byte, as the client meant it. */
    @ParameterizedTest(name = "{0} → {1}")
    @CsvSource(delimiter = '|', value = {
            "/api/items|/api/items",
            // "é" sent as UTF-8 (C3 A9) and read as two Latin-1 chars
            "/caf\u00c3\u00a9|/caf\u00e9",
            "Jos\u00c3\u00a9|Jos\u00e9",
            // a rocket: four bytes of UTF-8
            "\u00f0\u009f\u009a\u0080|\uD83D\uDE80",
            // one byte E9 alone is not UTF-8: left as read
            "caf\u00e9|caf\u00e9",
            // already decoded (a char beyond one byte): left as it is
            "caf\u00c3\u00a9\u20ac|caf\u00c3\u00a9\u20ac",
    })
    void readsBytesThatAreUtf8AsUtf8(String read, String meant) {
        assertThat(HeaderText.asSent(read)).isEqualTo(meant);
        // and the path from either is the same as from its escapes
        assertThat(RequestLine.servedPath("/" + HeaderText.asSent(read)))
                .isEqualTo(RequestLine.servedPath("/" + meant));
    }
}
