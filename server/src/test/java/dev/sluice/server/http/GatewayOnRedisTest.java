package dev.sluice.server.http;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.redis.RedisServer;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/** Two gateways in front of one upstream, on one real Redis: the limit is shared, and a dead Redis fails as configured. */
class GatewayOnRedisTest {
    private static int get(Gateway gateway, String user) throws Exception {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + "/api"))
                .header("X-User", user).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    @Test
    void twoGatewaysShareOneLimitAndFailClosedWhenRedisDies() throws Exception {
        try (RedisServer redis = RedisServer.start(); Upstream upstream = new Upstream()) {
            String config = "store: " + redis.uri() + "\non_store_failure: closed\nstore_timeout: 2s\npolicies:\n  - name: shared\n"
                    + "    key: [header:X-User]\n    algorithm: sliding-window\n    limits: [3/1h]\n";
            try (LiveConfig first = LiveConfig.of(ConfigLoader.parse("a.yaml", config), new ServerMetrics());
                 LiveConfig second = LiveConfig.of(ConfigLoader.parse("b.yaml", config), new ServerMetrics());
                 Gateway one = Gateway.start(first, URI.create(upstream.uri()), "127.0.0.1", 0);
                 Gateway two = Gateway.start(second, URI.create(upstream.uri()), "127.0.0.1", 0)) {
                assertThat(get(one, "ann")).isEqualTo(200);
                assertThat(get(two, "ann")).isEqualTo(200);
                assertThat(get(one, "ann")).isEqualTo(200);
                assertThat(get(two, "ann")).as("the fourth, through either gateway").isEqualTo(429);
                assertThat(get(one, "ann")).isEqualTo(429);
                assertThat(upstream.requests.get()).isEqualTo(3);
                redis.kill();
                assertThat(get(one, "bob")).as("fail closed: Redis is gone").isEqualTo(429);
                assertThat(upstream.requests.get()).isEqualTo(3);
            }
        }
    }

    private static HttpResponse<String> send(Gateway gateway, String user) throws Exception {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port()
                + "/api")).header("X-User", user).build(), HttpResponse.BodyHandlers.ofString());
    }

    /**
     * While Redis does not answer, nothing is known of a key: fail-open admits without the rate limit headers of an
     * untouched key (which told clients a full quota was theirs), as Envoy's and Kong's limiters send none then, and
     * fail-closed rejects with the wait until Redis is tried again and no count.
     */
    @Test
    void aDecisionOfTheFailurePolicyShowsNoQuota() throws Exception {
        try (RedisServer redis = RedisServer.start(); Upstream upstream = new Upstream()) {
            String policies = "store_timeout: 200ms\nheaders: [ietf, legacy]\npolicies:\n  - name: shared\n"
                    + "    key: [header:X-User]\n    algorithm: gcra\n    limits: [3/1h]\n";
            String store = "store: " + redis.uri() + "\n";
            try (LiveConfig open = LiveConfig.of(ConfigLoader.parse("open.yaml", store + "on_store_failure: open\n"
                         + policies), new ServerMetrics());
                 LiveConfig closed = LiveConfig.of(ConfigLoader.parse("closed.yaml", store + "on_store_failure: closed\n"
                         + policies), new ServerMetrics());
                 Gateway failOpen = Gateway.start(open, URI.create(upstream.uri()), "127.0.0.1", 0);
                 Gateway failClosed = Gateway.start(closed, URI.create(upstream.uri()), "127.0.0.1", 0)) {
                HttpResponse<String> answered = send(failOpen, "ann");
                assertThat(answered.statusCode()).isEqualTo(200);
                assertThat(answered.headers().firstValue("RateLimit")).hasValue("\"shared\";r=2;t=1200");
                assertThat(answered.headers().firstValue("X-RateLimit-Remaining")).hasValue("2");
                redis.kill();
                HttpResponse<String> admitted = send(failOpen, "ann");
                assertThat(admitted.statusCode()).as("fail open").isEqualTo(200);
                assertThat(admitted.headers().map().keySet()).as("no quota told").noneMatch(name ->
                        name.toLowerCase(java.util.Locale.ROOT).startsWith("ratelimit")
                        || name.toLowerCase(java.util.Locale.ROOT).startsWith("x-ratelimit")
                        || name.equalsIgnoreCase("Retry-After"));
                HttpResponse<String> rejected = send(failClosed, "ann");
                assertThat(rejected.statusCode()).as("fail closed").isEqualTo(429);
                assertThat(rejected.headers().firstValue("Retry-After")).isPresent();
                assertThat(rejected.headers().map().keySet()).noneMatch(name ->
                        name.toLowerCase(java.util.Locale.ROOT).startsWith("ratelimit")
                        || name.toLowerCase(java.util.Locale.ROOT).startsWith("x-ratelimit"));
            }
        }
    }
}
