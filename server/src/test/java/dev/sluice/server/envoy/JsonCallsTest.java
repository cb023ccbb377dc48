package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.http.ApiServer;
import dev.sluice.server.metrics.ServerMetrics;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.Code;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Envoy's rate limit call over HTTP/1 ({@code POST /json} on the API's port), as Envoy's own service takes it from
 * clients without gRPC: the same decisions as the gRPC call, on the same counts, written as protobuf's JSON.
 */
class JsonCallsTest {
    private static final String CONFIG = """
            policies:
              - name: per-address
                match:
                  domain: edge
                  descriptor: [remote_address]
                key: [descriptor:remote_address]
                algorithm: gcra
                limits: [3/1h]
            """;
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    private LiveConfig live;
    private ServiceUnderTest grpc;
    private ApiServer api;

    @BeforeEach
    void start() throws Exception {
        live = LiveConfig.of(ConfigLoader.parse("envoy.yaml", CONFIG), new ServerMetrics());
        grpc = ServiceUnderTest.start(live);
        api = ApiServer.start(live, "127.0.0.1", 0);
    }

    @AfterEach
    void stop() throws Exception {
        api.close();
        grpc.close();
        live.close();
    }

    private HttpResponse<String> post(String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + api.port() + "/json"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String call(String address, String hits) {
        return "{\"domain\": \"edge\", " + hits + "\"descriptors\": [{\"entries\": [{\"key\": \"remote_address\","
                + " \"value\": \"" + address + "\"}]}]}";
    }

    /**
     * The answer Envoy's service writes: protobuf's JSON names, in the fields' order, the defaults left out (no
     * limitRemaining of 0).
     */
    private static String answer(String code, int remaining, long resetSeconds) {
        return "{\"overallCode\":\"" + code + "\",\"statuses\":[{\"code\":\"" + code + "\",\"currentLimit\":"
                + "{\"requestsPerUnit\":3,\"unit\":\"HOUR\",\"name\":\"per-address\"},"
                + (remaining > 0 ? "\"limitRemaining\":" + remaining + "," : "")
                + "\"durationUntilReset\":\"" + resetSeconds + "s\"}]}";
    }

    @Test
    void aCallOverHttpIsDecidedAsOverGrpcOnTheSameCounts() throws Exception {
        HttpResponse<String> first = post(call("10.0.0.7", ""));
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.headers().firstValue("Content-Type")).hasValue("application/json");
        assertThat(first.body()).isEqualTo(answer("OK", 2, 1200)); // gcra 3/1h: 20 minutes a request

        RateLimitResponse second = grpc.envoy().shouldRateLimit(JsonCalls.read(call("10.0.0.7", "")));
        assertThat(second.getOverallCode()).isEqualTo(Code.OK);
        assertThat(second.getStatuses(0).getLimitRemaining()).as("one count for both").isEqualTo(1);
        assertThat(JsonCalls.write(second)).isEqualTo(answer("OK", 1, 2400));

        assertThat(post(call("10.0.0.7", "")).body()).isEqualTo(answer("OK", 0, 3600));
        HttpResponse<String> over = post(call("10.0.0.7", ""));
        assertThat(over.statusCode()).as("Envoy's service: 429 over the limit").isEqualTo(429);
        String full = answer("OVER_LIMIT", 0, 3600); // the limit's reset, and Retry-After the wait until one fits
        assertThat(over.body()).isEqualTo(full.substring(0, full.length() - 1)
                + ",\"responseHeadersToAdd\":[{\"key\":\"Retry-After\",\"value\":\"1200\"}]}");
        assertThat(grpc.envoy().shouldRateLimit(JsonCalls.read(call("10.0.0.7", ""))).getOverallCode())
                .isEqualTo(Code.OVER_LIMIT);
    }

    @Test
    void hitsAddendIsTakenByItsNameOrItsJsonName() throws Exception {
        assertThat(post(call("10.0.0.8", "\"hits_addend\": 2, ")).body()).isEqualTo(answer("OK", 1, 2400));
        assertThat(post(call("10.0.0.8", "\"hitsAddend\": 2, ")).statusCode()).as("2 more do not fit in 1").isEqualTo(429);
        assertThat(post(call("10.0.0.8", "\"hitsAddend\": 1, ")).body()).isEqualTo(answer("OK", 0, 3600));
    }

    @Test
    void aDescriptorNoPolicyMatchesIsOkAndAnUnknownDomainToo() throws Exception {
        HttpResponse<String> none = post("{\"domain\": \"elsewhere\", \"descriptors\": [{\"entries\": [{\"key\": \"k\"}]}]}");
        assertThat(none.statusCode()).isEqualTo(200);
        assertThat(none.body()).isEqualTo("{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\"}]}");
    }

    @Test
    void aCallThatIsNoneIsA400ThatSaysWhyAndChargesNothing() throws Exception {
        assertRefused("{\"domain\": \"edge\", \"descriptor\": []}",
                "descriptor: no such field in envoy.service.ratelimit.v3.RateLimitRequest");
        assertRefused("{\"domain\": \"edge\", \"hits_addend\": \"many\", \"descriptors\": []}",
                "hits_addend: expected a whole number, got the string \"many\"");
        assertRefused("{\"domain\": \"edge\", \"hitsAddend\": 1e400, \"descriptors\": []}",
                "the body is not a RateLimitRequest: Out of range uint32 value: 1e400"); // as sent, not "Infinity"
        assertRefused("{\"domain\": \"edge\", \"hitsAddend\": 2.0000000000000001, \"descriptors\": []}",
                "the body is not a RateLimitRequest: Not an uint32 value: 2.0000000000000001");
        assertRefused("{\"domain\": \"edge\", \"hitsAddend\": -1, \"descriptors\": []}",
                "the body is not a RateLimitRequest: Out of range uint32 value: -1");
        assertRefused("{\"domain\": \"\", \"descriptors\": [{\"entries\": [{\"key\": \"remote_address\", \"value\": \"a\"}]}]}",
                "domain: must not be empty"); // the gRPC call's own words
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [{\"entries\": [{\"value\": \"10.0.0.9\"}]}]}",
                "descriptors[0].entries[0].key: must not be empty");
        assertRefused("{\"domain\": \"edge\"", "the body is not JSON: Unexpected end-of-input: expected close marker"
                + " for Object (start marker at line 1, column 1)");
        assertThat(post(call("10.0.0.9", "")).body()).as("nothing charged").isEqualTo(answer("OK", 2, 1200));

        HttpResponse<String> got = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + api.port() + "/json"))
                .GET().build(), HttpResponse.BodyHandlers.ofString());
        assertThat(got.statusCode()).isEqualTo(405);
        assertThat(got.headers().firstValue("Allow")).hasValue("POST");
    }

    /**
     * A value of another kind than its field's is a 400 naming the field, as in Envoy's service, and charges nothing.
     * A past bug, found by a review: protobuf-java's reader took {@code "domain": ["edge"]}, {@code "domain": 5} or
     * {@code "value": 7.70} (read as "7.7") as strings, and such calls were decided and charged.
     */
    @Test
    void aValueOfAnotherKindIsA400NamingItsField() throws Exception {
        String entries = "\"descriptors\": [{\"entries\": [{\"key\": \"remote_address\", \"value\": \"10.0.0.6\"}]}]}";
        assertRefused("{\"domain\": [\"edge\"], " + entries, "domain: expected a string, got an array");
        assertRefused("{\"domain\": 5, " + entries, "domain: expected a string, got the number 5");
        assertRefused("{\"domain\": true, " + entries, "domain: expected a string, got a boolean");
        assertRefused("{\"domain\": {}, " + entries, "domain: expected a string, got an object");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [{\"entries\": [{\"key\": \"remote_address\","
                + " \"value\": 7.70}]}]}", "descriptors[0].entries[0].value: expected a string, got the number 7.70");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [{\"entries\": [{\"key\": \"remote_address\","
                + " \"value\": [null]}]}]}", "descriptors[0].entries[0].value: expected a string, got an array");
        assertRefused("{\"domain\": \"edge\", \"hitsAddend\": [2], " + entries, "hitsAddend: expected a whole number,"
                + " got an array");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": {}}", "descriptors: expected an array, got an object");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [[]]}", "descriptors[0]: expected an object"
                + " (RateLimitDescriptor), got an array");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [{\"hitsAddend\": [3], \"entries\": []}]}",
                "descriptors[0].hitsAddend: expected a whole number, got an array");
        assertRefused("{\"domain\": \"edge\", \"descriptors\": [{\"entries\": [{\"key\": \"k\"}], \"limit\":"
                + " {\"requestsPerUnit\": 5, \"unit\": [\"MINUTE\"]}}]}", "descriptors[0].limit.unit: expected one of"
                + " [UNKNOWN, SECOND, MINUTE, HOUR, DAY, MONTH, YEAR], got an array");
        assertRefused("{\"domain\": \"edge\", \"x\": " + "[".repeat(900) + "]".repeat(900) + ", " + entries,
                "x: no such field in envoy.service.ratelimit.v3.RateLimitRequest");
        // what protobuf's JSON takes: a number written as a string, null for a default
        assertThat(post("{\"domain\": \"edge\", \"hitsAddend\": \"2\", \"descriptors\": [{\"entries\": [{\"key\":"
                + " \"remote_address\", \"value\": \"10.0.0.6\"}], \"limit\": null}]}").body())
                .as("nothing charged before").isEqualTo(answer("OK", 1, 2400));
    }

    private void assertRefused(String body, String error) throws Exception {
        HttpResponse<String> refused = post(body);
        assertThat(refused.statusCode()).as(body).isEqualTo(400);
        assertThat(refused.body()).isEqualTo("{\"error\":" + com.fasterxml.jackson.databind.json.JsonMapper.builder()
                .build().writeValueAsString(error) + "}");
    }

    @Test
    void theJsonIsReadAndWrittenAsProtobufsOwn() {
        RateLimitRequest read = JsonCalls.read(call("10.0.0.1", "\"hitsAddend\": 7, "));
        assertThat(read.getDomain()).isEqualTo("edge");
        assertThat(read.getHitsAddend()).isEqualTo(7);
        assertThat(read.getDescriptors(0).getEntries(0).getValue()).isEqualTo("10.0.0.1");
        RateLimitResponse unlimited = RateLimitResponse.newBuilder().setOverallCode(Code.OK)
                .addStatuses(RateLimitResponse.DescriptorStatus.newBuilder().setCode(Code.OK).setLimitRemaining(-1))
                .build();
        assertThat(JsonCalls.write(unlimited)).as("a uint32 written unsigned")
                .isEqualTo("{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\",\"limitRemaining\":4294967295}]}");
        assertThat(JsonCalls.status(unlimited)).isEqualTo(200);
        assertThat(JsonCalls.status(unlimited.toBuilder().setOverallCode(Code.OVER_LIMIT).build())).isEqualTo(429);
        assertThat(JsonCalls.status(unlimited.toBuilder().setOverallCode(Code.UNKNOWN).build())).isEqualTo(500);
    }

    /**
     * A review found {@code q=3} of a RateLimit-Policy answered as {@code q\u003d3}: Java's printer escapes for HTML
     * what Envoy's service (Go's protojson) writes as itself. Other escapes stay, an escaped backslash among them.
     */
    @Test
    void charactersAreWrittenAsEnvoysServiceWritesThem() {
        RateLimitResponse answer = RateLimitResponse.newBuilder().setOverallCode(Code.OK)
                .addResponseHeadersToAdd(io.envoyproxy.envoy.config.core.v3.HeaderValue.newBuilder()
                        .setKey("RateLimit-Policy").setValue("\"per-address\";q=3;w=3600"))
                .addResponseHeadersToAdd(io.envoyproxy.envoy.config.core.v3.HeaderValue.newBuilder()
                        .setKey("X-Odd").setValue("<a & 'b'> \\u003d\t\u0001"))
                .build();
        assertThat(JsonCalls.write(answer)).isEqualTo("{\"overallCode\":\"OK\",\"responseHeadersToAdd\":["
                + "{\"key\":\"RateLimit-Policy\",\"value\":\"\\\"per-address\\\";q=3;w=3600\"},"
                + "{\"key\":\"X-Odd\",\"value\":\"<a & 'b'> \\\\u003d\\t\\u0001\"}]}");
    }
}
