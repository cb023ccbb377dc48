package dev.sluice.server.http;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class UpstreamAddressTest {
    /** A past bug a review found: a host with an '_' (a Docker Compose service's name) was refused. */
    @ParameterizedTest(name = "{0}")
    @CsvSource({
            "http://my_api:3000, my_api, 3000, false, my_api:3000, 3000",
            "http://my_api, my_api, -1, false, my_api, 80",
            "https://api.example.com:8443/, api.example.com, 8443, true, api.example.com:8443, 8443",
            "https://api.example.com, api.example.com, -1, true, api.example.com, 443",
            "http://127.0.0.1:8081, 127.0.0.1, 8081, false, 127.0.0.1:8081, 8081",
            "http://[::1]:8081, [::1], 8081, false, [::1]:8081, 8081",
    })
    void readsTheHostAndPortWritten(String text, String host, int port, boolean tls, String hostHeader, int connected) {
        UpstreamAddress address = UpstreamAddress.parse(text);
        assertThat(address).isEqualTo(new UpstreamAddress(host, port, tls));
        assertThat(address.hostHeader()).isEqualTo(hostHeader);
        assertThat(address.portOrDefault()).isEqualTo(connected);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"localhost:80", "ftp://h:21", "http://h:1/api", "http://h:99999", "http://h:80/?a=1",
            "http://127.0.0.1:0", "http://user@h:1", "http://user@my_api:1", "http://my_api:0", "http://my_api:x",
            "http://my_api:1/api", "http://my api:1", "http://", "http://-my_api:1"})
    void refusesWhatItCannotForwardTo(String text) {
        assertThatThrownBy(() -> UpstreamAddress.parse(text)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("expected http://host:port or https://host:port (no path, query or user), got \"" + text + "\"");
    }

    /** A past bug a review found: the gateway started Vert.x before it read the address, and left it running. */
    @org.junit.jupiter.api.Test
    void aGatewayRefusedItsAddressLeavesNoThreadsBehind() {
        long before = vertxThreads();
        assertThatThrownBy(() -> Gateway.start(null, java.net.URI.create("ftp://h:21"), "127.0.0.1", 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ftp://h:21");
        assertThat(vertxThreads()).as("Vert.x threads").isLessThanOrEqualTo(before);
    }

    private static long vertxThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(thread -> thread.getName().startsWith("vertx-blocked-thread-checker")).count();
    }
}
