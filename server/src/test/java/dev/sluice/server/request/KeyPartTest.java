package dev.sluice.server.request;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class KeyPartTest {
    private record Fixed(String method, String path, String host, String ip, Map<String, String> headers,
                         Map<String, String> queries) implements ClientRequest {
        public String header(String name) {
            return headers.get(name.toLowerCase());
        }

        public String query(String name) {
            return queries.get(name);
        }
    }

    private static final ClientRequest REQUEST = new Fixed("GET", "/api/items", "api.example.com", "10.0.0.7",
            Map.of("x-api-key", "k1", "x-odd", "a|b%c"), Map.of("page", "2"));

    private static List<KeyPart> parts(String... texts) {
        return List.of(texts).stream().map(KeyPart::parse).toList();
    }

    @Test
    void everyPartReadsItsValue() {
        assertThat(KeyPart.keyOf(parts("ip", "header:X-API-Key", "query:page", "route", "method", "host", "const:v1"),
                REQUEST, false)).isEqualTo("10.0.0.7|k1|2|/api/items|GET|api.example.com|v1");
    }

    @Test
    void aMissingPartIsEmptyUnlessThePolicySkips() {
        assertThat(KeyPart.keyOf(parts("header:X-User", "ip"), REQUEST, false)).isEqualTo("|10.0.0.7");
        assertThat(KeyPart.keyOf(parts("header:X-User", "ip"), REQUEST, true)).isNull();
    }

    @Test
    void separatorsInsideValuesAreEscapedSoKeysNeverCollide() {
        assertThat(KeyPart.keyOf(parts("header:X-Odd", "const:d"), REQUEST, false)).isEqualTo("a%7Cb%25c|d");
    }

    @Test
    void partsPrintAsTheyAreWritten() {
        for (String text : List.of("ip", "header:X-API-Key", "query:page", "route", "method", "host", "const:all")) {
            assertThat(KeyPart.parse(text).toString()).isEqualTo(text);
        }
    }

    @Test
    void refusesUnknownParts() {
        assertThatThrownBy(() -> KeyPart.parse("cookie:sid")).hasMessage(
                "unknown key part \"cookie:sid\": expected ip, header:NAME, query:NAME, route, method, host, descriptor:KEY or const:TEXT");
        assertThatThrownBy(() -> KeyPart.parse("header:")).hasMessage("bad name in \"header:\"");
        assertThatThrownBy(() -> KeyPart.parse("query:a b")).hasMessage("bad name in \"query:a b\"");
        assertThatThrownBy(() -> KeyPart.parse("const:")).hasMessageStartingWith("unknown key part \"const:\"");
    }

    @Test
    void hostsLoseTheirPortAndCase() {
        assertThat(ClientRequest.hostWithoutPort("API.Example.com:8443")).isEqualTo("api.example.com");
        assertThat(ClientRequest.hostWithoutPort("[::1]:80")).isEqualTo("[::1]");
        assertThat(ClientRequest.hostWithoutPort("[::1]")).isEqualTo("[::1]");
        // fully qualified, the same host: a past bug let api.example.com. escape a policy for api.example.com
        assertThat(ClientRequest.hostWithoutPort("API.EXAMPLE.COM.:80")).isEqualTo("api.example.com");
        assertThat(ClientRequest.hostWithoutPort("api.example.com.")).isEqualTo("api.example.com");
        assertThat(ClientRequest.hostWithoutPort("")).isNull();
    }
}
