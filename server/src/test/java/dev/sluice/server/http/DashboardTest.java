package dev.sluice.server.http;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import org.htmlunit.BrowserVersion;
import org.htmlunit.WebClient;
import org.htmlunit.html.DomElement;
import org.htmlunit.html.HtmlPage;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The dashboard ({@code GET /}) run by a browser engine (HtmlUnit's, as Chrome): its script fetches
 * {@code /v1/stats} and draws one box per policy with its counts and busiest keys. A script error fails the
 * test. A bug pinned: the first dashboard chained {@code append} (which returns nothing), so a browser
 * stopped at the first policy and showed none.
 */
class DashboardTest {
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    private static int check(ApiServer server, String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/check"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    @Test
    void showsEveryPolicyWithItsCountsAndBusiestKeys() throws Exception {
        String config = """
                policies:
                  - name: small
                    key: [ip]
                    algorithm: fixed-window
                    limits: [3/1h]
                  - name: quiet
                    key: [ip]
                    algorithm: gcra
                    limits: [10/1s]
                    mode: shadow
                """;
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("d.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0);
             WebClient browser = new WebClient(BrowserVersion.CHROME)) {
            for (int i = 0; i < 5; i++) {
                assertThat(check(server, "{\"policy\":\"small\",\"key\":\"10.0.0.7\"}")).isEqualTo(i < 3 ? 200 : 429);
            }
            browser.getOptions().setThrowExceptionOnScriptError(true);
            HtmlPage page = browser.getPage("http://127.0.0.1:" + server.port() + "/");
            browser.waitForBackgroundJavaScriptStartingBefore(1_000);

            assertThat(page.getElementById("store").getTextContent()).isEqualTo("store memory: healthy");
            List<DomElement> boxes = page.getByXPath("//div[@class='policy']");
            assertThat(boxes).hasSize(2);
            DomElement small = boxes.get(0);
            assertThat(small.getFirstElementChild().getTextContent()).isEqualTo("small (reject)");
            assertThat(small.getTextContent()).contains("admitted 3", "rejected 2");
            List<DomElement> rows = small.getByXPath(".//tr");
            assertThat(rows).extracting(DomElement::getTextContent)
                    .containsExactly("busiest keys, this minute and the lastrequestsrejected", "10.0.0.752");
            DomElement quiet = boxes.get(1);
            assertThat(quiet.getFirstElementChild().getTextContent()).isEqualTo("quiet (shadow)");
            assertThat(quiet.getTextContent()).contains("admitted 0", "rejected 0");
            assertThat(quiet.getByXPath(".//canvas")).hasSize(1);
        }
    }

    /**
     * The busiest keys leave {@code /v1/stats} masked where a client may hold a secret in them (a header, a cookie, a
     * query parameter, a user, a descriptor's value), or where a key {@code /v1/check} names does not look like what its
     * part gives (an API key for a policy keyed by address): {@code /v1/stats} answers anyone who reaches the port, and
     * reviews found it serving the ten busiest API keys whole. An address and a route stay as they are;
     * {@code dashboard_keys: shown} shows them all.
     */
    @Test
    void keysAClientMayHoldASecretInAreMasked() throws Exception {
        String config = """
                policies:
                  - name: by-key
                    key: [header:X-API-Key, route]
                    algorithm: fixed-window
                    limits: [3/1h]
                  - name: by-ip
                    key: [ip]
                    algorithm: fixed-window
                    limits: [3/1h]
                """;
        String apiKey = "sk_live_0123456789abcdef0123";
        String request = "{\"method\":\"GET\",\"path\":\"/api/items\",\"ip\":\"10.0.0.7\","
                + "\"headers\":{\"X-API-Key\":\"" + apiKey + "\"}}";
        for (String shown : new String[] {"", "dashboard_keys: shown\n"}) {
            try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("d.yaml", shown + config), new ServerMetrics());
                 ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
                CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/check-request"))
                        .POST(HttpRequest.BodyPublishers.ofString(request)).build(), HttpResponse.BodyHandlers.ofString());
                check(server, "{\"policy\":\"by-key\",\"key\":\"short\"}"); // not the parts joined: masked whole
                check(server, "{\"policy\":\"by-ip\",\"key\":\"" + apiKey + "\"}"); // no address: masked
                check(server, "{\"policy\":\"by-ip\",\"key\":\"3fa29c01deadbeef3fa29c01\"}"); // hex, no address
                String stats = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port()
                        + "/v1/stats")).build(), HttpResponse.BodyHandlers.ofString()).body();
                if (shown.isEmpty()) {
                    assertThat(stats).contains("{\"key\":\"sk_l…" + sha256(apiKey) + "|/api/items\",\"requests\":1,",
                                    "{\"key\":\"10.0.0.7\",\"requests\":1,", "{\"key\":\"…" + sha256("short") + "\",",
                                    "{\"key\":\"sk_l…" + sha256(apiKey) + "\",")
                            .contains("{\"key\":\"3fa2…" + sha256("3fa29c01deadbeef3fa29c01") + "\",")
                            .doesNotContain(apiKey, "short", "3fa29c01deadbeef3fa29c01\"");
                } else {
                    assertThat(stats).contains("{\"key\":\"" + apiKey + "|/api/items\",", "{\"key\":\"short\",",
                            "{\"key\":\"" + apiKey + "\",");
                }
            }
        }
    }

    /** The first 8 hex digits of the SHA-256 of {@code value}, as the dashboard masks it. */
    private static String sha256(String value) throws Exception {
        return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                .digest(value.getBytes(java.nio.charset.StandardCharsets.UTF_8)), 0, 4);
    }
}
