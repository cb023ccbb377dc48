package dev.sluice.server;

import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.http.ApiServer;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.redis.RedisServer;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code GET /metrics}: Prometheus text with the names of docs/server.md, fed by real decisions and a real Redis failing. */
class MetricsTest {
    private static final HttpClient CLIENT = HttpClient.newHttpClient();
    private static final String SHARED_KEYS = "sluice_store_keys{pool=\"shared\"}";
    private static final Pattern SAMPLE = Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\\{[^}]*})?) (\\S+)$");

    private static HttpResponse<String> call(ApiServer server, String path, String body) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path));
        return CLIENT.send(body == null ? request.build() : request.POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** Every sample of the exposition, by name with labels as printed. */
    private static Map<String, Double> scrape(ApiServer server) throws Exception {
        HttpResponse<String> response = call(server, "/metrics", null);
        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("Content-Type").orElseThrow()).startsWith("text/plain");
        Map<String, Double> samples = new HashMap<>();
        for (String line : response.body().split("\n")) {
            if (line.startsWith("#") || line.isBlank()) {
                continue;
            }
            Matcher sample = SAMPLE.matcher(line);
            assertThat(sample.matches()).as("a Prometheus sample: %s", line).isTrue();
            samples.put(sample.group(1), Double.parseDouble(sample.group(2)));
        }
        return samples;
    }

    /**
     * A review found a Redis store a reload replaced counted as it was when replaced: what it did after, deciding what
     * had been asked of it until it was closed (a failing Redis being left, the usual case), was lost. It is counted
     * as it goes until closed, then kept as it was then, once.
     */
    @Test
    void aReplacedStoreIsCountedUntilItIsClosed() throws Exception {
        dev.sluice.algorithm.Rule rule = dev.sluice.algorithm.Rule.of(dev.sluice.Algorithm.GCRA,
                List.of(dev.sluice.Limit.parse("10/1s")));
        Pattern errors = Pattern.compile("(?m)^sluice_store_errors_total\\{store=\"redis\"} (\\S+)$");
        try (RedisServer redis = RedisServer.start(); ServerMetrics metrics = new ServerMetrics()) {
            dev.sluice.redis.RedisStore old = dev.sluice.redis.RedisStore.builder(redis.uri())
                    .timeout(java.time.Duration.ofMillis(300)).build();
            dev.sluice.redis.RedisStore next = dev.sluice.redis.RedisStore.builder(redis.uri()).build();
            metrics.watch(old, "redis");
            metrics.watch(next, "redis"); // a reload: the old one still decides what was asked of it
            redis.kill();
            old.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK); // fails, open
            Matcher counted = errors.matcher(metrics.scrape());
            assertThat(counted.find()).isTrue();
            assertThat(Double.parseDouble(counted.group(1))).as("counted after it was replaced").isEqualTo(1.0);
            old.close();
            metrics.retired(old);
            counted = errors.matcher(metrics.scrape());
            assertThat(counted.find()).isTrue();
            assertThat(Double.parseDouble(counted.group(1))).as("kept once closed, once").isEqualTo(1.0);
            next.close();
        }
    }

    /**
     * Found by attacking the server: a client sending a new key a request, under limits of a day, filled the
     * in-memory store, which then rejected every new key, and nothing showed it. Its room is now measured; a
     * store that rejects new keys when full counts them, one that evicts (the default) counts the keys evicted.
     */
    /**
     * In an application's registry (Spring Boot's, with its common tags), Sluice's meters keep their names beside the
     * application's, the JVM's are not added twice, and closing takes this one's away, those counted late too, and
     * leaves the application's; a second one on the same registry is refused while the first holds it (a review
     * found a second's gauges reading the first's state, and the first's closing taking the second's meters).
     */
    @Test
    void theMetersCanLiveInTheApplicationsRegistry() {
        io.micrometer.core.instrument.simple.SimpleMeterRegistry application =
                new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        application.config().commonTags("application", "shop");
        application.counter("orders.placed").increment();
        ServerMetrics metrics = new ServerMetrics(application);
        assertThat(metrics.name()).isEqualTo("sluice");
        metrics.gatewayFailed("502");
        metrics.watchDecisions("p");
        metrics.rejected("p");
        assertThat(application.get("sluice.decisions").tags("policy", "p", "outcome", "rejected").counter().count())
                .isEqualTo(1.0);
        assertThat(application.get("sluice.decisions").tags("policy", "p", "outcome", "allowed").counter().count())
                .isZero();
        assertThat(application.get("sluice.requests").tags("outcome", "rejected").counter().count()).isEqualTo(1.0);
        assertThat(application.get("sluice.gateway.failures").tags("what", "502", "application", "shop", "sluice_filter",
                "sluice").counter().count()).isEqualTo(1.0);
        assertThat(application.getMeters()).noneMatch(meter -> meter.getId().getName().startsWith("jvm."));
        org.assertj.core.api.Assertions.assertThatThrownBy(metrics::scrape).hasMessage("Sluice's metrics are in the"
                + " application's registry, a SimpleMeterRegistry, which has no Prometheus text: the application serves"
                + " them");
        metrics.close();
        assertThat(application.getMeters()).extracting(meter -> meter.getId().getName()).containsExactly("orders.placed");
        metrics.gatewayFailed("504"); // counted late, by a request still being answered
        metrics.reloaded(false);
        assertThat(application.getMeters()).extracting(meter -> meter.getId().getName()).containsExactly("orders.placed");
        try (ServerMetrics next = new ServerMetrics(application)) { // the name is free again
            assertThat(next.name()).isEqualTo("sluice");
            next.rejected("q");
            assertThat(application.get("sluice.decisions").tags("policy", "q", "outcome", "rejected").counter().count())
                    .isEqualTo(1.0);
        }
    }

    /**
     * Several in one application's registry (two filters, one before the application's authentication and one after;
     * the contexts a test framework keeps in one JVM) each keep meters of their own, told apart by the tag sluice_filter: a
     * name taken is taken again with -2, -3, ... after it, in the registry or in one a composite over it reaches
     * (Micrometer's global registry over Spring's). A review found the second refused, which stopped the
     * application's start, and one on Spring's registry beside one on the global registry over it sharing meters.
     */
    @Test
    void severalInOneRegistryKeepMetersOfTheirOwn() {
        io.micrometer.core.instrument.simple.SimpleMeterRegistry application =
                new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        io.micrometer.core.instrument.composite.CompositeMeterRegistry global =
                new io.micrometer.core.instrument.composite.CompositeMeterRegistry().add(application);
        try (ServerMetrics before = new ServerMetrics(global, "limits");
             ServerMetrics after = new ServerMetrics(global, "limits");
             ServerMetrics beside = new ServerMetrics(application, "limits");
             ServerMetrics other = new ServerMetrics(application, "users")) {
            assertThat(List.of(before.name(), after.name(), beside.name(), other.name()))
                    .containsExactly("limits", "limits-2", "limits-3", "users");
            before.rejected("login");
            after.rejected("login");
            after.rejected("login");
            assertThat(application.get("sluice.decisions").tags("sluice_filter", "limits", "policy", "login", "outcome",
                    "rejected").counter().count()).isEqualTo(1.0);
            assertThat(application.get("sluice.decisions").tags("sluice_filter", "limits-2", "policy", "login", "outcome",
                    "rejected").counter().count()).isEqualTo(2.0);
            after.close();
            assertThat(application.find("sluice.decisions").tags("sluice_filter", "limits-2").counters()).isEmpty();
            assertThat(application.get("sluice.decisions").tags("sluice_filter", "limits", "policy", "login", "outcome",
                    "rejected").counter().count()).isEqualTo(1.0);
            try (ServerMetrics again = new ServerMetrics(application, "limits")) {
                assertThat(again.name()).as("limits-2 is free again").isEqualTo("limits-2");
                again.rejected("login");
                after.close(); // once more (Spring's destroy and the application's own): it took again's meters
                assertThat(application.get("sluice.decisions").tags("sluice_filter", "limits-2", "policy", "login",
                        "outcome", "rejected").counter().count()).isEqualTo(1.0);
                try (ServerMetrics fourth = new ServerMetrics(application, "limits")) {
                    assertThat(fourth.name()).as("and its name").isEqualTo("limits-4");
                }
            }
        }
    }

    @Test
    void aFullInMemoryStoreShows() throws Exception {
        String config = "policies:\n  - name: p\n    key: [ip]\n    algorithm: fixed-window\n    limits: [5/1d]\n";
        for (dev.sluice.store.WhenFull whenFull : List.of(dev.sluice.store.WhenFull.REJECT, dev.sluice.store.WhenFull.EVICT)) {
            dev.sluice.store.InMemoryStore two = dev.sluice.store.InMemoryStore.builder().maxKeys(2).whenFull(whenFull)
                    .build();
            try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), two, new ServerMetrics());
                 ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
                for (String key : new String[] {"a", "b", "c", "d", "e"}) {
                    call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"" + key + "\"}");
                }
                boolean rejects = whenFull == dev.sluice.store.WhenFull.REJECT;
                Map<String, Double> samples = scrape(server);
                assertThat(samples).as("%s", whenFull).containsEntry("sluice_store_keys{pool=\"shared\"}", 2.0)
                        .containsEntry("sluice_store_max_keys{pool=\"shared\"}", 2.0)
                        .containsEntry("sluice_store_turned_away_total{pool=\"shared\"}", rejects ? 3.0 : 0.0)
                        .containsEntry("sluice_store_evicted_total{pool=\"shared\"}", rejects ? 0.0 : 3.0)
                        .containsEntry("sluice_decisions_total{outcome=\"rejected\",policy=\"p\"}", rejects ? 3.0 : 0.0);
            }
        }
    }

    /**
     * The server's in-memory store drops its expired keys on its own: the store drops them only when crowded, so after
     * a burst of new keys sluice_store_keys stayed near max_keys for good, and its alert fired with two keys alive.
     */
    @Test
    void expiredKeysLeaveTheCountOfKeys() throws Exception {
        // windows of 2 s: the 50 calls take well under it on a loaded machine (of 200 ms, a CI-like run found the
        // keys swept before the first scrape)
        String config = "policies:\n  - name: p\n    key: [ip]\n    algorithm: fixed-window\n    limits: [5/2s]\n";
        java.time.Duration before = LiveConfig.sweepPeriod;
        LiveConfig.sweepPeriod = java.time.Duration.ofMillis(100);
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            for (int i = 0; i < 50; i++) {
                call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k" + i + "\"}");
            }
            assertThat(scrape(server).get(SHARED_KEYS)).isGreaterThan(0.0);
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (scrape(server).get(SHARED_KEYS) > 0 && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertThat(scrape(server)).containsEntry(SHARED_KEYS, 0.0);
        } finally {
            LiveConfig.sweepPeriod = before;
        }
    }

    /**
     * A policy's own store (its max_keys) is a pool of its own in the room's meters. A reload that takes the policy away
     * takes its two gauges away, which would read NaN for good, and keeps its counts, which never go back; one that
     * changes its max_keys counts what the replaced store evicted.
     */
    @Test
    void aPolicysOwnStoreIsCountedAsAPoolOfItsOwn(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        String policies = """
                policies:
                  - name: p
                    key: [ip]
                    algorithm: fixed-window
                    limits: [5/1d]
                  - name: own
                    key: [ip]
                    algorithm: fixed-window
                    limits: [5/1d]
                    max_keys: %d
                """;
        java.nio.file.Path file = dir.resolve("sluice.yaml");
        java.nio.file.Files.writeString(file, policies.formatted(2));
        try (LiveConfig live = LiveConfig.load(file, new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            for (String key : new String[] {"a", "b", "c", "d", "e"}) {
                call(server, "/v1/check", "{\"policy\":\"own\",\"key\":\"" + key + "\"}");
            }
            call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"a\"}");
            assertThat(scrape(server)).containsEntry("sluice_store_keys{pool=\"own\"}", 2.0)
                    .containsEntry("sluice_store_max_keys{pool=\"own\"}", 2.0)
                    .containsEntry("sluice_store_evicted_total{pool=\"own\"}", 3.0)
                    .containsEntry("sluice_store_turned_away_total{pool=\"own\"}", 0.0)
                    .containsEntry(SHARED_KEYS, 1.0)
                    .containsEntry("sluice_store_max_keys{pool=\"shared\"}", 1_000_000.0)
                    .containsEntry("sluice_store_evicted_total{pool=\"shared\"}", 0.0);
            java.nio.file.Files.writeString(file, policies.formatted(3));
            assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
            for (String key : new String[] {"f", "g", "h", "i"}) {
                call(server, "/v1/check", "{\"policy\":\"own\",\"key\":\"" + key + "\"}");
            }
            assertThat(scrape(server)).containsEntry("sluice_store_keys{pool=\"own\"}", 3.0)
                    .containsEntry("sluice_store_max_keys{pool=\"own\"}", 3.0)
                    .as("3 by the replaced store, 1 by the new").containsEntry("sluice_store_evicted_total{pool=\"own\"}", 4.0);
            java.nio.file.Files.writeString(file, policies.formatted(3).substring(0, policies.formatted(3).indexOf("  - name: own")));
            assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
            assertThat(scrape(server)).doesNotContainKeys("sluice_store_keys{pool=\"own\"}",
                            "sluice_store_max_keys{pool=\"own\"}")
                    .containsEntry("sluice_store_evicted_total{pool=\"own\"}", 4.0).containsEntry(SHARED_KEYS, 1.0);
        }
    }

    @Test
    void decisionsAreCountedByPolicyAndOutcome() throws Exception {
        String config = """
                policies:
                  - name: p
                    key: [ip]
                    algorithm: fixed-window
                    limits: [2/1h]
                  - name: s
                    key: [ip]
                    algorithm: fixed-window
                    limits: [1/1h]
                    mode: shadow
                """;
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            // every series there at 0 before the first decision, so that rate() counts the first (a review found a
            // shadow policy's first rejections missed by its alert)
            assertThat(scrape(server)).containsEntry("sluice_decisions_total{outcome=\"allowed\",policy=\"p\"}", 0.0)
                    .containsEntry("sluice_decisions_total{outcome=\"shadow_rejected\",policy=\"s\"}", 0.0)
                    .containsEntry("sluice_config_last_reload_successful", 1.0);
            for (int i = 0; i < 3; i++) {
                call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"10.0.0.9\"}");
                call(server, "/v1/check", "{\"policy\":\"s\",\"key\":\"10.0.0.9\"}");
            }
            Map<String, Double> samples = scrape(server);
            assertThat(samples).containsEntry("sluice_decisions_total{outcome=\"allowed\",policy=\"p\"}", 2.0)
                    .containsEntry("sluice_decisions_total{outcome=\"rejected\",policy=\"p\"}", 1.0)
                    .containsEntry("sluice_decisions_total{outcome=\"delayed\",policy=\"p\"}", 0.0)
                    .containsEntry("sluice_decisions_total{outcome=\"allowed\",policy=\"s\"}", 1.0)
                    .containsEntry("sluice_decisions_total{outcome=\"shadow_rejected\",policy=\"s\"}", 2.0)
                    .containsEntry("sluice_store_seconds_count{pool=\"shared\"}", 6.0)
                    .containsEntry("sluice_store_errors_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_fail_open_total", 0.0)
                    .containsEntry("sluice_fail_closed_total", 0.0)
                    .containsEntry("sluice_store_timeouts_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_store_short_circuited_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_store_breaker_openings_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_store_script_reloads_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_store_remembered_rejections_total{store=\"memory\"}", 0.0)
                    .containsEntry("sluice_config_reloads_total{result=\"success\"}", 0.0)
                    .containsEntry("sluice_config_reloads_total{result=\"failure\"}", 0.0);
            assertThat(samples).containsKey("sluice_store_seconds_bucket{pool=\"shared\",le=\"+Inf\"}");
            assertThat(samples.keySet()).anyMatch(name -> name.startsWith("jvm_memory_used_bytes{"));

            String stats = call(server, "/v1/stats", null).body();
            assertThat(stats).contains("\"top_keys\":[{\"key\":\"10.0.0.9\",\"requests\":3,\"rejected\":1}]");
            assertThat(call(server, "/", null).body()).contains("<title>Sluice</title>").contains("/v1/stats");
        }
    }

    /**
     * A request two policies decide counts twice in {@code sluice_decisions_total}, once a policy; what was admitted
     * and rejected is {@code sluice_requests_total} (a review found no count of requests at all, and the dashboard
     * adding the policies' decisions up: six admitted, four rejected, for one request admitted and four rejected).
     */
    @Test
    void requestsAreCountedOnceWhateverHowManyPoliciesDecideThem() throws Exception {
        String config = """
                policies:
                  - name: per-ip
                    match: {path: /api/**}
                    key: [ip]
                    algorithm: fixed-window
                    limits: [1000/1h]
                  - name: per-user
                    match: {path: /api/**}
                    key: [header:X-User]
                    algorithm: fixed-window
                    limits: [1/1h]
                  - name: paced
                    match: {path: /paced}
                    key: [ip]
                    algorithm: gcra
                    limits: [1/1h]
                    mode: delay
                    max_delay: 2h
                """;
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            String api = "{\"method\":\"GET\",\"path\":\"/api/items\",\"host\":\"h\",\"ip\":\"10.0.0.1\","
                    + "\"headers\":{\"X-User\":\"u\"}}";
            for (int i = 0; i < 5; i++) {
                assertThat(call(server, "/v1/check-request", api).statusCode()).isEqualTo(i == 0 ? 200 : 429);
            }
            String paced = "{\"method\":\"GET\",\"path\":\"/paced\",\"host\":\"h\",\"ip\":\"10.0.0.1\"}";
            assertThat(call(server, "/v1/check-request", paced).statusCode()).isEqualTo(200);
            assertThat(call(server, "/v1/check-request", paced).statusCode()).isEqualTo(200); // held an hour
            String elsewhere = "{\"method\":\"GET\",\"path\":\"/other\",\"host\":\"h\",\"ip\":\"10.0.0.1\"}";
            assertThat(call(server, "/v1/check-request", elsewhere).statusCode()).isEqualTo(200);
            assertThat(call(server, "/v1/check", "{\"policy\":\"per-ip\",\"key\":\"k\",\"cost\":0}").statusCode())
                    .isEqualTo(200);
            assertThat(call(server, "/v1/check", "{\"policy\":\"per-user\",\"key\":\"u\"}").statusCode())
                    .isEqualTo(429);
            assertThat(scrape(server))
                    .containsEntry("sluice_decisions_total{outcome=\"allowed\",policy=\"per-ip\"}", 5.0)
                    .containsEntry("sluice_decisions_total{outcome=\"peeked\",policy=\"per-ip\"}", 1.0)
                    .containsEntry("sluice_decisions_total{outcome=\"allowed\",policy=\"per-user\"}", 1.0)
                    .containsEntry("sluice_decisions_total{outcome=\"rejected\",policy=\"per-user\"}", 5.0)
                    .containsEntry("sluice_requests_total{outcome=\"allowed\"}", 2.0) // the first, and the first paced
                    .containsEntry("sluice_requests_total{outcome=\"delayed\"}", 1.0)
                    .containsEntry("sluice_requests_total{outcome=\"rejected\"}", 5.0)
                    .containsEntry("sluice_requests_total{outcome=\"peeked\"}", 1.0)
                    .containsEntry("sluice_requests_total{outcome=\"unlimited\"}", 1.0);
        }
    }

    /**
     * The store's histogram starts at a microsecond: its first bucket was Micrometer's default, a millisecond, which
     * held nearly every decision of a healthy store, so that its median read 0.5 ms whatever the store did (a
     * review found it).
     */
    @Test
    void theStoresTimesAreBucketedFromAMicrosecond() throws Exception {
        String config = "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k\"}");
            java.util.List<Double> bounds = scrape(server).keySet().stream()
                    .filter(name -> name.startsWith("sluice_store_seconds_bucket{pool=\"shared\",le=\"") && !name.contains("+Inf"))
                    .map(name -> Double.parseDouble(name.replaceAll(".*le=\"([^\"]+)\".*", "$1"))).sorted().toList();
            assertThat(bounds.get(0)).isEqualTo(1.0e-6);
            assertThat(bounds).filteredOn(bound -> bound < 1.0e-4).hasSizeGreaterThanOrEqualTo(8);
        }
    }

    /**
     * The store's times by pool: the shared store's apart from a policy's own in-memory store, and a concurrency policy,
     * which asks no store, untimed. A review found the alert on a slow Redis blind once enough decisions were of the
     * microsecond kind, all in one histogram.
     */
    @Test
    void theStoresTimesAreTheirPoolsAndAConcurrencyPolicyIsNotTimed() throws Exception {
        String config = "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [5/1h]\n"
                + "  - name: own\n    key: [ip]\n    algorithm: gcra\n    limits: [5/1h]\n    max_keys: 100\n"
                + "  - name: c\n    key: [ip]\n    algorithm: concurrency\n    limits: [5/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k\"}");
            call(server, "/v1/check", "{\"policy\":\"own\",\"key\":\"k\"}");
            call(server, "/v1/check", "{\"policy\":\"own\",\"key\":\"k\"}");
            call(server, "/v1/check", "{\"policy\":\"c\",\"key\":\"k\"}");
            Map<String, Double> samples = scrape(server);
            assertThat(samples).containsEntry("sluice_store_seconds_count{pool=\"shared\"}", 1.0)
                    .containsEntry("sluice_store_seconds_count{pool=\"own\"}", 2.0);
            assertThat(samples.keySet()).filteredOn(name -> name.startsWith("sluice_store_seconds_count"))
                    .as("no pool of the concurrency policy's").hasSize(2);
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void theExampleAlertsAndDashboardUseOnlyMetricsAndLabelsTheServerExports() throws Exception {
        java.nio.file.Path examples = java.nio.file.Path.of(System.getProperty("user.dir")).getParent().resolve("examples");
        Map<String, Object> file = new org.yaml.snakeyaml.Yaml().load(
                java.nio.file.Files.readString(examples.resolve("prometheus-alerts.yaml")));
        Map<String, String> queries = new java.util.LinkedHashMap<>(); // what it is → its PromQL
        for (Map<String, Object> group : (java.util.List<Map<String, Object>>) file.get("groups")) {
            for (Map<String, Object> rule : (java.util.List<Map<String, Object>>) group.get("rules")) {
                assertThat(rule).containsKeys("alert", "expr", "labels", "annotations");
                queries.put("alert " + rule.get("alert"), (String) rule.get("expr"));
                // the labels its annotations name ({{ $labels.store }}) must be the expression's
                queries.put("annotations of " + rule.get("alert"), rule.get("annotations").toString());
            }
        }
        com.fasterxml.jackson.databind.JsonNode dashboard = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(examples.resolve("grafana-dashboard.json").toFile());
        java.util.Set<Integer> ids = new java.util.HashSet<>();
        java.util.List<com.fasterxml.jackson.databind.JsonNode> panels = new java.util.ArrayList<>();
        dashboard.get("panels").forEach(panels::add);
        for (int i = 0; i < panels.size(); i++) { // the panels of a collapsed row are inside it
            if (panels.get(i).has("panels")) {
                panels.get(i).get("panels").forEach(panels::add);
            }
        }
        panels.removeIf(panel -> panel.path("type").asText().equals("row"));
        for (com.fasterxml.jackson.databind.JsonNode panel : panels) {
            assertThat(ids.add(panel.get("id").asInt())).as("panel id %s", panel.get("id")).isTrue();
            assertThat(panel.get("datasource").get("uid").asText()).isEqualTo("${datasource}");
            for (com.fasterxml.jackson.databind.JsonNode target : panel.get("targets")) {
                // each of Sluice's series read of the deployments chosen, not of every one Prometheus scrapes
                Matcher series = Pattern.compile("\\b(?:sluice|jvm)_[a-z_]+(\\{[^}]*})?").matcher(target.get("expr").asText());
                while (series.find()) {
                    assertThat(series.group()).as("panel \"%s\"", panel.get("title").asText()).contains("{job=~\"$job\"");
                }
                queries.put("panel \"" + panel.get("title").asText() + "\" " + target.get("refId").asText(),
                        target.get("expr").asText());
            }
        }
        String config = "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1h]\n"
                + "  - name: c\n    key: [ip]\n    algorithm: concurrency\n    limits: [1/1h]\n";
        try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
             ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k\"}");
            java.util.Set<String> samples = scrape(server).keySet();
            java.util.Set<String> exported = new java.util.HashSet<>();
            samples.forEach(sample -> exported.add(sample.replaceFirst("\\{.*", "")));
            int names = 0;
            int labels = 0;
            for (Map.Entry<String, String> query : queries.entrySet()) {
                Matcher name = Pattern.compile("\\b(sluice|jvm)_[a-z_]+").matcher(query.getValue());
                while (name.find()) {
                    assertThat(exported).as("%s in %s", name.group(), query.getKey()).contains(name.group());
                    names++;
                }
                // every matcher of a selector (=, !=, =~, !~): its label on that metric, and a value given
                // outright (= or !=) one the metric has; a past gap a review found: != and =~ went unchecked,
                // and a label only had to be on some metric
                Matcher selector = Pattern.compile("\\b((?:sluice|jvm)_[a-z_]+)\\{([^}]*)}").matcher(query.getValue());
                while (selector.find()) {
                    String metric = selector.group(1);
                    java.util.List<String> own = samples.stream().filter(sample -> sample.startsWith(metric + "{")).toList();
                    Matcher label = Pattern.compile("(\\w+)\\s*(=~|!~|!=|=)\\s*\"([^\"]*)\"").matcher(selector.group(2));
                    while (label.find()) {
                        String labelName = label.group(1);
                        if (labelName.equals("job") || labelName.equals("instance")) { // Prometheus adds these two
                            continue;
                        }
                        String pair = labelName + "=\"" + label.group(3) + "\"";
                        boolean literal = label.group(2).endsWith("=") && !label.group(2).equals("=~")
                                && !label.group(3).contains("$");
                        assertThat(own).as("%s %s in %s", metric, literal ? pair : labelName, query.getKey())
                                .anyMatch(sample -> literal ? sample.contains(pair) : sample.contains(labelName + "=\""));
                        labels++;
                    }
                }
                // the labels grouped by, and those an alert's annotations name
                Matcher grouped = Pattern.compile("\\b(?:by|without)\\s*\\(([^)]*)\\)|\\$labels\\.(\\w+)").matcher(query.getValue());
                while (grouped.find()) {
                    String list = grouped.group(1) != null ? grouped.group(1) : grouped.group(2);
                    for (String grouping : list.split("\\s*,\\s*")) {
                        String one = grouping.trim();
                        if (!one.isEmpty() && !one.equals("instance") && !one.equals("job")) { // Prometheus adds these two
                            assertThat(samples).as("label %s in %s", one, query.getKey())
                                    .anyMatch(sample -> sample.contains("{" + one + "=\"") || sample.contains("," + one + "=\""));
                            labels++;
                        }
                    }
                }
            }
            assertThat(queries.keySet()).anyMatch(what -> what.startsWith("alert ")).anyMatch(what -> what.startsWith("panel "));
            assertThat(names).isGreaterThanOrEqualTo(20);
            assertThat(labels).isGreaterThanOrEqualTo(6);
        }
    }

    @Test
    void storeFailuresAreCountedAndHealthSaysSo() throws Exception {
        for (String policy : new String[] {"open", "closed"}) {
            try (RedisServer redis = RedisServer.start()) {
                String config = "store: " + redis.uri() + "\non_store_failure: " + policy + "\nstore_timeout: 2s\n"
                        + "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [100/1s]\n"
                        + "  - name: tight\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1h]\n";
                try (LiveConfig live = LiveConfig.of(ConfigLoader.parse("m.yaml", config), new ServerMetrics());
                     ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
                    assertThat(call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k\"}").statusCode()).isEqualTo(200);
                    HttpResponse<String> healthy = call(server, "/healthz", null);
                    assertThat(healthy.statusCode()).isEqualTo(200);
                    assertThat(healthy.body()).isEqualTo("{\"status\":\"ok\",\"store\":\"" + redis.uri()
                            + "\",\"on_store_failure\":\"" + policy + "\"}");
                    // rejected by Redis once, then from the process's memory until the retry-after has passed
                    for (int expected : new int[] {200, 429, 429, 429}) {
                        assertThat(call(server, "/v1/check", "{\"policy\":\"tight\",\"key\":\"t\"}").statusCode())
                                .isEqualTo(expected);
                    }
                    assertThat(scrape(server)).containsEntry("sluice_store_remembered_rejections_total{store=\"redis\"}", 2.0)
                            .containsEntry("sluice_store_errors_total{store=\"redis\"}", 0.0)
                            .containsEntry("sluice_store_up", 1.0);
                    redis.kill();
                    for (int i = 0; i < 5; i++) {
                        int status = call(server, "/v1/check", "{\"policy\":\"p\",\"key\":\"k\"}").statusCode();
                        assertThat(status).isEqualTo(policy.equals("open") ? 200 : 429);
                    }
                    Map<String, Double> samples = scrape(server);
                    assertThat(samples.get("sluice_fail_" + policy + "_total")).isEqualTo(5.0);
                    assertThat(samples.get("sluice_store_up")).as("the breaker is open").isEqualTo(0.0);
                    assertThat(samples.get("sluice_store_errors_total{store=\"redis\"}")).isGreaterThanOrEqualTo(3.0);
                    // three failures in a row open the breaker; each of the five was asked of Redis or spared by it
                    assertThat(samples.get("sluice_store_breaker_openings_total{store=\"redis\"}")).isGreaterThanOrEqualTo(1.0);
                    assertThat(samples.get("sluice_store_errors_total{store=\"redis\"}")
                            + samples.get("sluice_store_short_circuited_total{store=\"redis\"}")).isEqualTo(5.0);
                    HttpResponse<String> health = call(server, "/healthz", null);
                    assertThat(health.statusCode()).as("still deciding, by the failure policy").isEqualTo(200);
                    assertThat(health.body()).isEqualTo("{\"status\":\"store unavailable\",\"store\":\""
                            + live.policies().config().storeShown() + "\",\"on_store_failure\":\"" + policy + "\"}");
                }
            }
        }
    }
}
