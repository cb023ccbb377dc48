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

    /** A configuration on {@code redis} of one policy, {@code shared}, keyed by ip, of {@code algorithm} and {@code limit}. */
    private static String shared(RedisServer redis, String algorithm, String limit) {
        return "store: " + redis.uri() + "\nstore_timeout: 2s\npolicies:\n  - name: shared\n    key: [ip]\n"
                + "    algorithm: " + algorithm + "\n    limits: [" + limit + "]\n";
    }

    /**
     * Stopped as the process is asked to ({@code SIGTERM}): a check under way (here waiting on a Redis busy for
     * seconds) is answered, a connection made meanwhile is closed unanswered, and the wait ends with the last answer.
     */
    @Test
    void aStoppedServerAnswersTheCheckUnderWayAndTakesNoNewConnection() throws Exception {
        try (RedisServer redis = RedisServer.start();
             // a timeout past Redis's 3 s of sleep: the check under way is Redis's, not the failure policy's
             LiveConfig live = LiveConfig.of(ConfigLoader.parse("a.yaml", shared(redis, "gcra", "5/1h")
                     .replace("store_timeout: 2s", "store_timeout: 10s")), new ServerMetrics());
             ApiServer api = ApiServer.start(live, "127.0.0.1", 0)) {
            String request = "{\"policy\":\"shared\",\"key\":\"10.0.0.5\"}";
            assertThat(post(api.port(), request)).isEqualTo(200);
            var busy = redis.sleep("3");
            redis.awaitHanging();
            var underWay = HttpClient.newHttpClient().sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
                    + api.port() + "/v1/check")).POST(HttpRequest.BodyPublishers.ofString(request)).build(),
                    HttpResponse.BodyHandlers.ofString());
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(2);
            while (live.policies().underWay() == 0) { // the check waits on Redis (a fixed sleep stood for it)
                assertThat(System.nanoTime()).as("the check under way within 2 s").isLessThan(deadline);
                Thread.sleep(10);
            }
            long started = System.nanoTime();
            api.startDraining();
            try (java.net.Socket late = new java.net.Socket("127.0.0.1", api.port())) {
                late.setSoTimeout(5_000);
                late.getOutputStream().write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(
                        java.nio.charset.StandardCharsets.US_ASCII));
                byte[] read;
                try {
                    read = late.getInputStream().readAllBytes();
                } catch (java.net.SocketException reset) {
                    read = new byte[0];
                }
                assertThat(read).as("a connection made while draining is closed unanswered").isEmpty();
            }
            api.awaitDrained(System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(20));
            HttpResponse<String> answered = underWay.get(1, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(answered.statusCode()).isEqualTo(200);
            assertThat(answered.body()).contains("\"remaining\":3");
            assertThat(System.nanoTime() - started).as("over with the answer, not at the deadline")
                    .isLessThan(java.util.concurrent.TimeUnit.SECONDS.toNanos(5));
            busy.get(10, java.util.concurrent.TimeUnit.SECONDS);
        }
    }

    /**
     * {@code store_connect: background}: a server (or an application with the servlet filter) starts while its Redis
     * is down, deciding by {@code on_store_failure} meanwhile, and on Redis once it comes; without it, the start is
     * refused, as before. A review found a Spring application crash-looping through a Redis outage so.
     */
    @Test
    void aStoreConnectedInTheBackgroundServesWhileRedisIsDown(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            redis.kill();
            String policy = "on_store_failure: closed\nstore_timeout: 2s\npolicies:\n  - name: shared\n    key: [ip]\n"
                    + "    algorithm: gcra\n    limits: [1/1h]\n";
            java.nio.file.Path now = java.nio.file.Files.writeString(dir.resolve("now.yaml"),
                    "store: " + redis.uri() + "\n" + policy);
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> LiveConfig.load(now, new ServerMetrics()))
                    .hasMessageContaining(": cannot connect: ");
            java.nio.file.Path file = java.nio.file.Files.writeString(dir.resolve("sluice.yaml"),
                    "store: " + redis.uri() + "\nstore_connect: background\n" + policy);
            try (dev.sluice.testkit.LogCapture log = dev.sluice.testkit.LogCapture.of("sluice");
                 LiveConfig live = LiveConfig.load(file, new ServerMetrics());
                 ApiServer api = ApiServer.start(live, "127.0.0.1", 0)) {
                assertThat(log.messages()).anySatisfy(line -> assertThat(line).startsWith(file + ":1: store "
                        + redis.uri() + ": not reachable now (").endsWith("); connecting in the background, each"
                        + " decision meanwhile on_store_failure's (closed)"));
                String request = "{\"policy\":\"shared\",\"key\":\"10.0.0.6\"}";
                assertThat(post(api.port(), request)).as("failing closed").isEqualTo(429);
                // and says so: the failure policy decided, the counts are not the key's
                java.net.http.HttpResponse<String> failed = java.net.http.HttpClient.newHttpClient().send(
                        java.net.http.HttpRequest.newBuilder(java.net.URI.create("http://127.0.0.1:" + api.port()
                                + "/v1/check")).POST(java.net.http.HttpRequest.BodyPublishers.ofString(request)).build(),
                        java.net.http.HttpResponse.BodyHandlers.ofString());
                assertThat(failed.body()).contains("\"remaining\":0,").endsWith(",\"store_failed\":true}");
                assertThat(failed.headers().firstValue("RateLimit")).isEmpty();
                redis.restart();
                // the first 200 can only be Redis's; the next, its count
                long giveUp = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
                while (post(api.port(), request) != 200) {
                    assertThat(System.nanoTime()).as("on Redis within 30 s").isLessThan(giveUp);
                    Thread.sleep(50);
                }
                assertThat(post(api.port(), request)).isEqualTo(429);
                try (Resp resp = redis.connect()) {
                    assertThat((Long) resp.call("DBSIZE")).isPositive();
                }
                // store_connect changed alone opens a new store, as the edit asks (a review found it taken silently)
                dev.sluice.store.Store background = live.store();
                java.nio.file.Files.writeString(file, "store: " + redis.uri() + "\nstore_connect: now\n" + policy);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).isNotSameAs(background);
            }
        }
    }

    @Test
    void twoServersOnOneRedisShareTheLimit() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            String config = shared(redis, "gcra", "2/1h");
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

    /**
     * A store over TLS: {@code rediss://} with the certificate to trust named by {@code store_trust}, relative to the
     * file. Without it the server refuses the store at its line, saying why (the JVM trusts only public CAs).
     */
    @Test
    void aStoreOverTlsTrustsTheCertificatesTheFileNames(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        dev.sluice.testkit.redis.SelfSignedCertificate certificate =
                dev.sluice.testkit.redis.SelfSignedCertificate.make(dir, "ip:127.0.0.1");
        try (RedisServer redis = RedisServer.startTls(certificate)) {
            String policy = "store_timeout: 2s\npolicies:\n  - name: shared\n    key: [ip]\n    algorithm: gcra\n"
                    + "    limits: [1/1h]\n";
            java.nio.file.Path file = java.nio.file.Files.writeString(dir.resolve("sluice.yaml"),
                    "store: " + redis.tlsUri() + "\nstore_trust: server.crt\n" + policy);
            try (LiveConfig live = LiveConfig.load(file, new ServerMetrics());
                 ApiServer api = ApiServer.start(live, "127.0.0.1", 0)) {
                String request = "{\"policy\":\"shared\",\"key\":\"10.0.0.9\"}";
                assertThat(post(api.port(), request)).isEqualTo(200);
                assertThat(post(api.port(), request)).isEqualTo(429);
                // the certificates rotated in the same file (here: the same one twice) open a new store once the
                // watcher has seen them stay so for a period, with no edit of sluice.yaml; reviews found only a new
                // path did, then only at the next edit of the file
                dev.sluice.store.Store first = live.store();
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
                java.nio.file.Files.writeString(dir.resolve("server.crt"), java.nio.file.Files.readString(
                        certificate.certificate()) + java.nio.file.Files.readString(certificate.certificate()));
                assertThat(live.look()).as("the first look at the change").isEqualTo(LiveConfig.Reload.UNCHANGED);
                assertThat(live.store()).isSameAs(first);
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).isNotSameAs(first);
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
                // a trust file broken is refused, and its fix is seen still (a review found it watched no more)
                dev.sluice.store.Store second = live.store();
                String good = java.nio.file.Files.readString(dir.resolve("server.crt"));
                java.nio.file.Files.writeString(dir.resolve("server.crt"), "not a certificate\n");
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.REFUSED);
                java.nio.file.Files.writeString(dir.resolve("server.crt"), good);
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
                assertThat(live.look()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).as("the same certificates as in force: the same store").isSameAs(second);
                assertThat(post(api.port(), request)).as("the count Redis kept").isEqualTo(429);
            }
            java.nio.file.Path untrusting = java.nio.file.Files.writeString(dir.resolve("untrusting.yaml"),
                    "store: " + redis.tlsUri() + "\n" + policy);
            org.assertj.core.api.Assertions.assertThatThrownBy(
                    () -> LiveConfig.of(ConfigLoader.load(untrusting), new ServerMetrics()).close())
                    .hasMessage("the configuration: store " + redis.tlsUri() + ": cannot connect: TLS handshake failed:"
                            + " its certificate is signed by none of the certificates trusted (give them with trust, or"
                            + " store_trust)");
        }
    }

    /**
     * A client that pipelines thousands of checks, whose answers wait on Redis, gets every one, in order, and the API
     * reads its requests only a few ahead of their answers ({@code StrictFraming}). Past weaknesses: Vert.x walks its
     * list of waiting requests for each one it reads, and a client pipelining without bound kept an event loop busy;
     * then the API cut off a client with more than 1,000 requests read and not answered, honest or not.
     */
    @Test
    void aClientPipeliningThousandsGetsEveryAnswerInOrder() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            String config = shared(redis, "fixed-window", "4990/1h");
            try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("a.yaml", config), new ServerMetrics());
                 ApiServer api = ApiServer.start(live, "127.0.0.1", 0)) {
                String body = "{\"policy\":\"shared\",\"key\":\"10.0.0.8\"}";
                String check = "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: " + body.length() + "\r\n\r\n" + body;
                int sent = 5_000;
                try (java.net.Socket socket = new java.net.Socket("127.0.0.1", api.port())) {
                    socket.setSoTimeout(30_000);
                    socket.getOutputStream().write((check.repeat(sent - 1) + check.replace("Host: x", "Host: x\r\nConnection: close"))
                            .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    String read = new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.ISO_8859_1);
                    java.util.List<String> statuses = java.util.regex.Pattern.compile("HTTP/1\\.1 (\\d{3}) ").matcher(read).results()
                            .map(found -> found.group(1)).toList();
                    assertThat(statuses).as("every one answered").hasSize(sent);
                    assertThat(statuses.subList(0, 4990)).as("in order: the first 4,990 admitted").containsOnly("200");
                    assertThat(statuses.subList(4990, sent)).as("then the limit").containsOnly("429");
                }
                assertThat(post(api.port(), body)).isEqualTo(429);
            }
        }
    }

    /**
     * Clients that leave in the middle of a head sent after a request they were answered, whose answers come from
     * Redis: nothing logged. A past weakness, found by a review: now and then (about one in 4,000) the head cut short
     * reached Vert.x as the answer before it was still being written, and Vert.x's 400 to a connection already gone
     * sent Netty's warning of an exception no one handled to the log.
     */
    @Test
    void clientsLeavingMidHeadLogNothing() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            String config = shared(redis, "gcra", "2/1h");
            try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("a.yaml", config), new ServerMetrics());
                 ApiServer api = ApiServer.start(live, "127.0.0.1", 0);
                 dev.sluice.testkit.LogCapture netty = dev.sluice.testkit.LogCapture.of("io.netty");
                 dev.sluice.testkit.LogCapture vertx = dev.sluice.testkit.LogCapture.of("io.vertx")) {
                for (int i = 0; i < 1_000; i++) {
                    String body = "{\"policy\":\"shared\",\"key\":\"mid-head\"}";
                    String check = "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: " + body.length() + "\r\n\r\n" + body;
                    try (java.net.Socket socket = new java.net.Socket("127.0.0.1", api.port())) {
                        socket.setSoTimeout(10_000);
                        socket.getOutputStream().write((check + "POST /v1/check HTTP/1.1\r\nHost: x\r\n")
                                .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        socket.getInputStream().read(); // the answer begun
                    }
                }
                Thread.sleep(200); // the closes, handled after the answers
                assertThat(netty.messages()).as("logged").isEmpty();
                assertThat(vertx.messages()).as("logged").isEmpty();
            }
        }
    }
}
