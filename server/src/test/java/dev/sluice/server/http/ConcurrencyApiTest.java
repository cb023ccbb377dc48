package dev.sluice.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/** A concurrency policy asked through {@code /v1/check}: a place is leased, and the lease runs out by itself. */
class ConcurrencyApiTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void placesAreLeasedUntilTheyExpire() throws Exception {
        String config = "policies:\n  - name: slots\n    key: [ip]\n    algorithm: concurrency\n    limits: [2/1s]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            HttpClient client = HttpClient.newHttpClient();
            java.util.function.Function<Integer, HttpResponse<String>> check = cost -> {
                try {
                    return client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/check"))
                            .POST(HttpRequest.BodyPublishers.ofString("{\"policy\":\"slots\",\"key\":\"k\",\"cost\":" + cost + "}"))
                            .build(), HttpResponse.BodyHandlers.ofString());
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            };
            assertThat(JSON.readTree(check.apply(1).body()).get("remaining").asLong()).isEqualTo(1);
            assertThat(JSON.readTree(check.apply(1).body()).get("remaining").asLong()).isZero();
            long leased = System.nanoTime(); // the later of the two leases runs out within 1 s of this
            HttpResponse<String> full = check.apply(1);
            assertThat(full.statusCode()).isEqualTo(429);
            JsonNode body = JSON.readTree(full.body());
            assertThat(body.get("retry_after_ms").asLong()).isBetween(1L, 1000L);
            assertThat(full.headers().firstValue("Retry-After")).hasValue("1");
            assertThat(full.headers().firstValue("RateLimit-Policy")).hasValue("\"slots\";q=2;w=1");
            HttpResponse<String> peek = check.apply(0);
            assertThat(peek.statusCode()).isEqualTo(200);
            assertThat(JSON.readTree(peek.body()).get("remaining").asLong()).isZero();
            assertThat(check.apply(3).statusCode()).as("more than the limit never fits").isEqualTo(429);
            Thread.sleep(Math.max(0, 1_100 - (System.nanoTime() - leased) / 1_000_000));
            HttpResponse<String> later = check.apply(2);
            assertThat(later.statusCode()).as("both leases expired: %s", later.body()).isEqualTo(200);
        }
    }
}
