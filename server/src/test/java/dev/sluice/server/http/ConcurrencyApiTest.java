package dev.sluice.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.ConcurrencyLimiter;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A concurrency policy asked through {@code /v1/check} and {@code /v1/check-request}: a place is leased and
 * answered with a permit; {@code POST /v1/release} gives it back at once, or the lease runs out by itself.
 */
class ConcurrencyApiTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    private static HttpResponse<String> post(ApiServer server, String path, String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void aPermitGivesThePlaceBackBeforeTheLeaseRunsOut() throws Exception {
        String config = "policies:\n  - name: one\n    key: [ip]\n    algorithm: concurrency\n    limits: [1/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String check = "{\"policy\":\"one\",\"key\":\"k\"}";
            HttpResponse<String> first = post(server, "/v1/check", check);
            assertThat(first.statusCode()).isEqualTo(200);
            String permit = JSON.readTree(first.body()).get("permit").asText();
            assertThat(permit).matches("[0-9a-f]{32}");
            HttpResponse<String> second = post(server, "/v1/check", check);
            assertThat(second.statusCode()).isEqualTo(429);
            assertThat(JSON.readTree(second.body()).has("permit")).as("a refusal holds nothing").isFalse();
            assertThat(JSON.readTree(post(server, "/v1/check", "{\"policy\":\"one\",\"key\":\"k\",\"cost\":0}").body())
                    .has("permit")).as("a peek holds nothing").isFalse();

            HttpResponse<String> released = post(server, "/v1/release", "{\"permit\":\"" + permit + "\"}");
            assertThat(released.statusCode()).isEqualTo(200);
            assertThat(released.body()).isEqualTo("{\"released\":true}");
            HttpResponse<String> again = post(server, "/v1/release", "{\"permit\":\"" + permit + "\"}");
            assertThat(again.statusCode()).isEqualTo(404);
            assertThat(JSON.readTree(again.body()).get("error").asText()).isEqualTo("permit: no place is held under \""
                    + permit + "\" (given back already, or its lease ran out)");

            HttpResponse<String> third = post(server, "/v1/check", check);
            assertThat(third.statusCode()).as("the place is free again").isEqualTo(200);
            assertThat(JSON.readTree(third.body()).get("permit").asText()).isNotEqualTo(permit);
        }
    }

    /**
     * A past bug, found by a review: a client of {@code /v1/check} sending a new key with each request and never
     * releasing held a place a key, until the server ran out of memory. A concurrency policy holds at most
     * {@link ConcurrencyLimiter#DEFAULT_MAX_PLACES} places over all keys; full, a request is a 429 with nothing
     * remaining, counted in {@code sluice_in_flight_turned_away_total}, and a place given back makes room.
     */
    @Test
    void aPolicyHoldsAtMostItsMostPlacesOverAllKeys() throws Exception {
        String config = "policies:\n  - name: one\n    key: [ip]\n    algorithm: concurrency\n    limits: [2/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String first = JSON.readTree(post(server, "/v1/check", "{\"policy\":\"one\",\"key\":\"first\"}").body())
                    .get("permit").asText();
            var policy = live.policies().policy("one");
            for (int i = 1; i < ConcurrencyLimiter.DEFAULT_MAX_PLACES; i++) { // in-process: a hundred thousand calls
                assertThat(live.policies().decide(policy, "k" + i, 1).toCompletableFuture().join().allowed()).isTrue();
            }
            HttpResponse<String> full = post(server, "/v1/check", "{\"policy\":\"one\",\"key\":\"first\"}");
            assertThat(full.statusCode()).as("its key has room, the policy none").isEqualTo(429);
            JsonNode body = JSON.readTree(full.body());
            assertThat(body.get("remaining").asLong()).isZero();
            assertThat(body.get("retry_after_ms").asLong()).as("until the first lease runs out")
                    .isBetween(3_590_000L, 3_600_000L);
            assertThat(body.has("permit")).isFalse();
            assertThat(live.metrics().scrape()).contains("sluice_in_flight_turned_away_total{policy=\"one\"} 1.0");

            assertThat(post(server, "/v1/release", "{\"permit\":\"" + first + "\"}").statusCode()).isEqualTo(200);
            assertThat(post(server, "/v1/check", "{\"policy\":\"one\",\"key\":\"new\"}").statusCode())
                    .as("a place given back").isEqualTo(200);
            assertThat(post(server, "/v1/check", "{\"policy\":\"one\",\"key\":\"newer\"}").statusCode()).isEqualTo(429);
        }
    }

    @Test
    void checkRequestAnswersAPermitForEachPlaceItHolds() throws Exception {
        String config = """
                policies:
                  - name: calls
                    key: [ip]
                    algorithm: gcra
                    limits: [100/1s]
                  - name: exports
                    key: [ip]
                    algorithm: concurrency
                    limits: [1/1h]
                """;
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String request = "{\"method\":\"GET\",\"path\":\"/export\",\"ip\":\"10.0.0.9\"}";
            JsonNode first = JSON.readTree(post(server, "/v1/check-request", request).body());
            assertThat(first.get("checked").get(0).has("permit")).as("a rate limit holds no place").isFalse();
            String permit = first.get("checked").get(1).get("permit").asText();
            assertThat(post(server, "/v1/check-request", request).statusCode()).isEqualTo(429);
            assertThat(post(server, "/v1/release", "{\"permit\":\"" + permit + "\"}").statusCode()).isEqualTo(200);
            assertThat(post(server, "/v1/check-request", request).statusCode()).isEqualTo(200);
        }
    }

    /**
     * A review found a refused request's entry of a concurrency policy that had admitted it reported the place taken,
     * though it was given back as the request was refused, and no permit came with it.
     */
    @Test
    void aRefusedRequestReportsThePlacesItsEarlierPoliciesGaveBack() throws Exception {
        String config = """
                policies:
                  - name: slots
                    key: [ip]
                    algorithm: concurrency
                    limits: [2/30s]
                  - name: hourly
                    key: [ip]
                    algorithm: fixed-window
                    limits: [1/1h]
                """;
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String request = "{\"method\":\"GET\",\"path\":\"/x\",\"ip\":\"10.0.0.9\"}";
            JsonNode first = JSON.readTree(post(server, "/v1/check-request", request).body());
            assertThat(first.get("checked").get(0).get("remaining").asLong()).isEqualTo(1);
            assertThat(first.get("checked").get(0).has("given_back")).isFalse();
            HttpResponse<String> refused = post(server, "/v1/check-request", request);
            assertThat(refused.statusCode()).isEqualTo(429);
            JsonNode slots = JSON.readTree(refused.body()).get("checked").get(0);
            assertThat(slots.get("allowed").asBoolean()).isTrue();
            assertThat(slots.get("given_back").asBoolean()).isTrue();
            assertThat(slots.get("remaining").asLong()).as("one place held by the first request, none by this").isEqualTo(1);
            assertThat(slots.has("permit")).isFalse();
            assertThat(JSON.readTree(post(server, "/v1/check", "{\"policy\":\"slots\",\"key\":\"10.0.0.9\",\"cost\":0}")
                    .body()).get("remaining").asLong()).as("what a peek says too").isEqualTo(1);
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "not JSON|{permit|400|the body is not JSON",
            "no permit|{}|400|permit: expected the permit string that /v1/check or /v1/check-request answered, got nothing",
            "a number|{\"permit\":7}|400|permit: expected the permit string that /v1/check or /v1/check-request answered, got 7",
            "another field|{\"permit\":\"a\",\"key\":\"k\"}|400|unknown field \"key\": expected permit",
            "too short|{\"permit\":\"0123\"}|400|permit: \"0123\" is not a permit (those are 32 hex digits, as /v1/check and /v1/check-request answer them)",
            "not hex|{\"permit\":\"0123456789abcdef0123456789abcdeg\"}|400|permit: \"0123456789abcdef0123456789abcdeg\" is not a permit",
            "upper case|{\"permit\":\"0123456789ABCDEF0123456789ABCDEF\"}|400|permit: \"0123456789ABCDEF0123456789ABCDEF\" is not a permit",
            "never handed out|{\"permit\":\"0123456789abcdef0123456789abcdef\"}|404|permit: no place is held under \"0123456789abcdef0123456789abcdef\" (given back already, or its lease ran out)"})
    void aBadReleaseIsRefusedWithItsReason(String name, String body, int status, String error) throws Exception {
        String config = "policies:\n  - name: one\n    key: [ip]\n    algorithm: concurrency\n    limits: [1/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("c.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            HttpResponse<String> response = post(server, "/v1/release", body);
            assertThat(response.statusCode()).isEqualTo(status);
            assertThat(JSON.readTree(response.body()).get("error").asText()).startsWith(error);
        }
    }

    @Test
    void placesAreLeasedUntilTheyExpire() throws Exception {
        String config = "policies:\n  - name: slots\n    key: [ip]\n    algorithm: concurrency\n    limits: [2/5s]\n";
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
            long first = System.nanoTime();
            assertThat(JSON.readTree(check.apply(1).body()).get("remaining").asLong()).isEqualTo(1);
            long firstAnswered = System.nanoTime();
            // the leases a second apart, so that the wait for the first to end is not the wait for the last (a review
            // found both taken at once, where either answer passed)
            Thread.sleep(1_000);
            assertThat(JSON.readTree(check.apply(1).body()).get("remaining").asLong()).isZero();
            // leases of 5 s: the checks below need them held, and a slow machine once spent 1 s on them
            long leased = System.nanoTime(); // the later of the two leases runs out within 5 s of this
            long asked = System.nanoTime();
            HttpResponse<String> full = check.apply(1);
            long answered = System.nanoTime();
            assertThat(full.statusCode()).isEqualTo(429);
            JsonNode body = JSON.readTree(full.body());
            long retryMs = body.get("retry_after_ms").asLong();
            // until the first lease ends: taken between first and firstAnswered, decided between asked and answered
            assertThat(retryMs).isBetween(5_000L - (answered - first) / 1_000_000 - 1,
                    5_000L - (asked - firstAnswered) / 1_000_000 + 1);
            assertThat(full.headers().firstValue("Retry-After")).as("whole seconds, rounded up")
                    .hasValue(Long.toString((retryMs + 999) / 1000));
            // places in flight, in the draft's unit for them, not 2 requests in 5 s (a review found the window)
            assertThat(full.headers().firstValue("RateLimit-Policy")).hasValue("\"slots\";q=2;qu=\"concurrent-requests\"");
            HttpResponse<String> peek = check.apply(0);
            assertThat(peek.statusCode()).isEqualTo(200);
            assertThat(JSON.readTree(peek.body()).get("remaining").asLong()).isZero();
            // the peek tells when the places held run out, as the refusal does
            assertThat(JSON.readTree(peek.body()).get("reset_after_ms").asLong()).isBetween(1L, 5000L);
            HttpResponse<String> never = check.apply(3);
            assertThat(never.statusCode()).isEqualTo(429);
            assertThat(JSON.readTree(never.body()).get("retry_after_ms").asLong()).as("more than the limit never fits")
                    .isEqualTo(-1);
            assertThat(never.headers().firstValue("Retry-After")).as("no wait would help").isEmpty();
            Thread.sleep(Math.max(0, 5_100 - (System.nanoTime() - leased) / 1_000_000));
            HttpResponse<String> later = check.apply(2);
            assertThat(later.statusCode()).as("both leases expired: %s", later.body()).isEqualTo(200);
            String permit = JSON.readTree(later.body()).get("permit").asText();
            Thread.sleep(5_100);
            HttpResponse<String> tooLate = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port()
                    + "/v1/release")).POST(HttpRequest.BodyPublishers.ofString("{\"permit\":\"" + permit + "\"}")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertThat(tooLate.statusCode()).as("its lease ran out: nothing to give back").isEqualTo(404);
        }
    }
}
