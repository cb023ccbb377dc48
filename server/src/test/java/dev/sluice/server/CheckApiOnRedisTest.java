package dev.sluice.server;

import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.http.ApiServer;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/** The service with its policies on a real Redis: two servers share one limit. */
class CheckApiOnRedisTest {
    private static int post(int port, String body) throws Exception {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/check"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    @Test
    void twoServersOnOneRedisShareTheLimit() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            String config = "store: " + redis.uri() + "\nstore_timeout: 2s\npolicies:\n  - name: shared\n    key: [ip]\n"
                    + "    algorithm: gcra\n    limits: [2/1h]\n";
            try (LiveConfig first = LiveConfig.of(ConfigLoader.parse("a.yaml", config), new ServerMetrics());
                 LiveConfig second = LiveConfig.of(ConfigLoader.parse("b.yaml", config), new ServerMetrics());
                 ApiServer one = ApiServer.start(first, "127.0.0.1", 0);
                 ApiServer two = ApiServer.start(second, "127.0.0.1", 0)) {
                String request = "{\"policy\":\"shared\",\"key\":\"10.0.0.7\"}";
                assertThat(post(one.port(), request)).isEqualTo(200);
                assertThat(post(two.port(), request)).isEqualTo(200);
                assertThat(post(one.port(), request)).isEqualTo(429);
                assertThat(post(two.port(), request)).isEqualTo(429);
                try (Resp resp = redis.connect()) {
                    assertThat(resp.call("EXISTS", "sluice:{" + Policies.storedKey(first.policies().policy("shared"), "10.0.0.7") + "}"))
                            .isEqualTo(1L);
                }
            }
        }
    }
}
