package dev.sluice.server.http;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code headers:} picks the sets of rate limit headers; Retry-After goes with every 429 whatever the sets. */
class HeaderSetsTest {
    private static final List<String> IETF = List.of("RateLimit-Policy", "RateLimit");
    private static final List<String> LEGACY = List.of("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset");

    @ParameterizedTest(name = "headers: {0}")
    @CsvSource(delimiter = '|', value = {"[ietf]|true|false", "[legacy]|false|true", "[]|false|false", "[legacy, ietf]|true|true"})
    void sendsTheChosenSets(String sets, boolean ietf, boolean legacy) throws Exception {
        String config = "headers: " + sets + "\npolicies:\n  - name: p\n    key: [ip]\n    algorithm: fixed-window\n    limits: [1/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("h.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            HttpRequest check = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/check"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"policy\":\"p\",\"key\":\"k\"}")).build();
            HttpClient client = HttpClient.newHttpClient();
            HttpResponse<String> admitted = client.send(check, HttpResponse.BodyHandlers.ofString());
            HttpResponse<String> rejected = client.send(check, HttpResponse.BodyHandlers.ofString());
            assertThat(admitted.statusCode()).isEqualTo(200);
            assertThat(rejected.statusCode()).isEqualTo(429);
            for (HttpResponse<String> response : List.of(admitted, rejected)) {
                IETF.forEach(name -> assertThat(response.headers().firstValue(name).isPresent()).as(name).isEqualTo(ietf));
                LEGACY.forEach(name -> assertThat(response.headers().firstValue(name).isPresent()).as(name).isEqualTo(legacy));
            }
            assertThat(admitted.headers().firstValue("Retry-After")).isEmpty();
            assertThat(rejected.headers().firstValue("Retry-After").orElseThrow()).matches("[1-9][0-9]*");
        }
    }
}
