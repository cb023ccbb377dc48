package dev.sluice.server.http;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.BrokenStore;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A fault of Sluice's own (a store with a bug, {@link BrokenStore}) is answered as one, by the service and by the
 * gateway: a 500 that says so, a line in the log with the cause, and nothing forwarded; never a hang, never a
 * decision.
 */
class BrokenStoreTest {
    private static final String CONFIG = """
            policies:
              - name: per-user
                key: [header:X-User]
                algorithm: gcra
                limits: [10/1s]
            """;
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    private final List<LogRecord> logged = new CopyOnWriteArrayList<>();
    private final Handler capture = new Handler() {
        @Override
        public void publish(LogRecord record) {
            if (record.getLevel().intValue() >= Level.SEVERE.intValue()) {
                logged.add(record);
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };
    private final Logger log = Logger.getLogger(ApiServer.class.getName());
    private LiveConfig live;

    @BeforeEach
    void start() throws Exception {
        log.addHandler(capture);
        live = LiveConfig.of(ConfigLoader.parse("broken.yaml", CONFIG), new BrokenStore(), new ServerMetrics());
    }

    @AfterEach
    void stop() {
        log.removeHandler(capture);
        live.close();
    }

    private static HttpResponse<String> send(HttpRequest.Builder request) throws Exception {
        return CLIENT.send(request.timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private void assertAnsweredAsAFault(HttpResponse<String> response, String logLine) {
        assertThat(response.statusCode()).isEqualTo(500);
        assertThat(response.headers().firstValue("Content-Type")).hasValue("application/json");
        assertThat(response.body()).isEqualTo("{\"error\":\"internal error; the server's log says more\"}");
        assertThat(response.headers().firstValue("Retry-After")).isEmpty();
        assertThat(logged).singleElement().satisfies(record -> {
            assertThat(record.getMessage()).isEqualTo(logLine);
            Throwable root = record.getThrown();
            while (root.getCause() != null) {
                root = root.getCause();
            }
            assertThat(root).isInstanceOf(IllegalStateException.class).hasMessage(BrokenStore.FAULT);
        });
        logged.clear();
    }

    @Test
    void theServiceAnswersA500AndLogsTheCause() throws Exception {
        try (ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String base = "http://127.0.0.1:" + server.port();
            assertAnsweredAsAFault(send(HttpRequest.newBuilder(URI.create(base + "/v1/check"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"policy\":\"per-user\",\"key\":\"alice\"}"))),
                    "failed to answer POST /v1/check");
            assertAnsweredAsAFault(send(HttpRequest.newBuilder(URI.create(base + "/v1/check-request"))
                    .POST(HttpRequest.BodyPublishers.ofString(
                            "{\"method\":\"GET\",\"path\":\"/x\",\"headers\":{\"X-User\":\"alice\"}}"))),
                    "failed to answer POST /v1/check-request");
        }
    }

    @Test
    void theGatewayAnswersA500AndForwardsNothing() throws Exception {
        try (Upstream upstream = new Upstream();
             Gateway gateway = Gateway.start(live, URI.create(upstream.uri()), "127.0.0.1", 0)) {
            assertAnsweredAsAFault(send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + "/x"))
                    .header("X-User", "alice")), "failed to answer GET /x");
            assertThat(upstream.seen).isEmpty();
        }
    }
}
