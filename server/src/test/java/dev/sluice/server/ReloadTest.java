package dev.sluice.server;

import dev.sluice.server.config.ConfigException;
import dev.sluice.server.http.ApiServer;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.LogCapture;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;

/** Hot reload of sluice.yaml: a good edit applies and keeps the counters of unchanged policies; a bad one changes nothing. */
class ReloadTest {
    private static final String FIRST = """
            policies:
              - name: kept
                key: [ip]
                algorithm: fixed-window
                limits: [3/1h]
              - name: changed
                key: [ip]
                algorithm: fixed-window
                limits: [2/1h]
              - name: slots
                key: [ip]
                algorithm: concurrency
                limits: [1/1h]
            """;
    private static final String SECOND = """
            policies:
              - name: kept
                match:
                  path: /api/**
                key: [ip]
                algorithm: fixed-window
                limits: [3/1h]
              - name: changed
                key: [ip]
                algorithm: fixed-window
                limits: [5/1h]
              - name: added
                key: [ip]
                algorithm: gcra
                limits: [1/1s]
              - name: slots
                key: [ip]
                algorithm: concurrency
                limits: [1/1h]
            """;

    @TempDir
    Path dir;
    private Path file;
    private LiveConfig live;
    private LogCapture log;

    @BeforeEach
    void load() throws Exception {
        file = dir.resolve("sluice.yaml");
        Files.writeString(file, FIRST);
        live = LiveConfig.load(file, new ServerMetrics());
        log = LogCapture.of("sluice");
    }

    @AfterEach
    void close() {
        log.close();
        live.close();
    }

    private long remaining(String policy, String key) throws Exception {
        Policies policies = live.policies();
        return policies.check(policies.policy(policy), key, 1).toCompletableFuture().get().decision().remaining();
    }

    @Test
    void aGoodEditAppliesAndUnchangedPoliciesKeepTheirCounters() throws Exception {
        assertThat(remaining("kept", "10.0.0.1")).isEqualTo(2);
        assertThat(remaining("changed", "10.0.0.1")).isEqualTo(1);
        assertThat(remaining("slots", "10.0.0.1")).isZero();
        Files.writeString(file, SECOND);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.policies().config().policies()).hasSize(4);
        Policies now = live.policies();
        assertThat(now.check(now.policy("slots"), "10.0.0.1", 1).toCompletableFuture().get().decision().allowed())
                .as("a request in flight before the reload is still in flight").isFalse();
        assertThat(remaining("kept", "10.0.0.1")).as("same algorithm and limits: counters kept").isEqualTo(1);
        assertThat(remaining("changed", "10.0.0.1")).as("new limits: a fresh start").isEqualTo(4);
        assertThat(remaining("added", "10.0.0.1")).isZero();
        assertThat(live.metrics().reloads(true)).isEqualTo(1);
        // what changed, said (a review found one line for every reload, whatever it changed)
        assertThat(log.messages()).containsExactly(file + ": reloaded, 4 policies in force; added: added; changed:"
                + " kept, changed (counts afresh)");
        assertThat(live.reload()).as("nothing changed since").isEqualTo(LiveConfig.Reload.UNCHANGED);
        Files.writeString(file, FIRST.replace("""
                  - name: changed
                    key: [ip]
                    algorithm: fixed-window
                    limits: [2/1h]
                """, "") + "max_keys: 100\n");
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(log.messages().get(1)).isEqualTo(file + ": reloaded, 2 policies in force; removed: changed, added;"
                + " changed: kept; store opened anew: memory, max_keys 100 (every count of the shared store starts afresh)");
    }

    /**
     * A review found a policy whose key changed (its limits not) keep the counts of the old key's values: the values
     * of another key, meaning something else. Its counters start afresh, as a change of limits does.
     */
    @Test
    void aPolicyWhoseKeyChangesStartsAfresh() throws Exception {
        assertThat(remaining("kept", "10.0.0.1")).isEqualTo(2);
        assertThat(remaining("changed", "10.0.0.1")).isEqualTo(1);
        Files.writeString(file, FIRST.replaceFirst("key: \\[ip]", "key: [header:X-Client]"));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.policies().policy("kept").key().toString()).isEqualTo("[header:X-Client]");
        assertThat(remaining("kept", "10.0.0.1")).as("another key: a fresh start").isEqualTo(2);
        assertThat(remaining("changed", "10.0.0.1")).as("its key unchanged: counters kept").isZero();
    }

    /**
     * The file in force gone and back, as it was: nothing to reload, and the gauge says it is in force again (a review
     * found it left at 0, and its alert firing, until an unrelated edit).
     */
    @Test
    void theFileInForceBackAsItWasIsInForceAgain() throws Exception {
        Files.delete(file);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.metrics().scrape()).contains("sluice_config_last_reload_successful 0.0");
        Files.writeString(file, FIRST);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.metrics().scrape()).contains("sluice_config_last_reload_successful 1.0");
    }

    /** Closed, a reload does nothing: a watcher that waited for the lock must not open a store nobody will close. */
    @Test
    void aClosedConfigurationReloadsNothing() throws Exception {
        Files.writeString(file, SECOND);
        live.close();
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
    }

    @Test
    void aBadEditIsLoggedCountedAndChangesNothing() throws Exception {
        assertThat(remaining("changed", "10.0.0.2")).isEqualTo(1);
        Policies before = live.policies();
        Files.writeString(file, FIRST.replace("[2/1h]", "[2/0s]"));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.policies()).isSameAs(before);
        assertThat(remaining("changed", "10.0.0.2")).isZero();
        assertThat(live.metrics().reloads(false)).isEqualTo(1);
        assertThat(log.messages()).anySatisfy(line -> assertThat(line).isEqualTo(file
                + ":9: policies[1].limits[0]: bad limit \"2/0s\": period must be > 0, got \"0s\" (the last good configuration stays in force)"));
        assertThat(live.reload()).as("the same bad file is reported once").isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.metrics().reloads(false)).isEqualTo(1);
        // the gauge the alert reads stays 0 while the bad file is there, however long (a count of refusals did not)
        assertThat(live.metrics().scrape()).contains("sluice_config_last_reload_successful 0.0");

        Files.writeString(file, SECOND);
        assertThat(live.reload()).as("mended").isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.metrics().reloads(true)).isEqualTo(1);
        assertThat(live.metrics().scrape()).contains("sluice_config_last_reload_successful 1.0");
    }

    @Test
    void timeoutSettingsDoNotResetTheInMemoryCounters() throws Exception {
        assertThat(remaining("kept", "10.0.0.3")).isEqualTo(2);
        Files.writeString(file, "store_timeout: 10ms\non_store_failure: closed\n" + FIRST);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(remaining("kept", "10.0.0.3")).isEqualTo(1);
    }

    /** {@code max_keys} bounds the store the server makes; a change of it opens a new one, as a change of store does. */
    @Test
    void maxKeysBoundsTheInMemoryStoreAndItsChangeOpensANewOne() throws Exception {
        assertThat(((InMemoryStore) live.store()).maxKeys()).isEqualTo(1_000_000);
        assertThat(remaining("kept", "10.0.0.4")).isEqualTo(2);
        Files.writeString(file, "max_keys: 2\n" + FIRST);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        InMemoryStore two = (InMemoryStore) live.store();
        assertThat(two.maxKeys()).isEqualTo(2);
        assertThat(remaining("kept", "10.0.0.4")).as("a new store: a fresh start").isEqualTo(2);
        for (String ip : new String[] {"10.0.0.5", "10.0.0.6", "10.0.0.7"}) {
            remaining("kept", ip);
        }
        assertThat(two.size()).isEqualTo(2);
        assertThat(two.evicted()).isEqualTo(2);
        assertThat(remaining("kept", "10.0.0.7")).as("the key decided last was kept").isEqualTo(1);
    }

    /**
     * A replaced store is closed outside the lock a reload takes to retire one: closing a Cluster's connections takes
     * seconds, and the next reload waited for it (a review found it). {@link LiveConfig#close()} still returns only once
     * every replaced store is closed, the one being closed then included.
     */
    @Test
    void aReloadDoesNotWaitForAReplacedStoreBeingClosed() throws Exception {
        Duration grace = LiveConfig.oldStoreGrace;
        Consumer<Store> closing = LiveConfig.closing;
        CountDownLatch entered = new CountDownLatch(1);
        // a latch for each store, so that close() is seen waiting for the one its look is closing, not for its own
        java.util.Map<Store, CountDownLatch> releases = new java.util.concurrent.ConcurrentHashMap<>();
        List<Store> closed = new CopyOnWriteArrayList<>();
        LiveConfig.oldStoreGrace = Duration.ZERO;
        LiveConfig.closing = store -> {
            entered.countDown();
            try {
                releases.computeIfAbsent(store, s -> new CountDownLatch(1)).await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            closing.accept(store);
            closed.add(store);
        };
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Store first = live.store();
            Files.writeString(file, "max_keys: 10\n" + FIRST);
            assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
            assertThat(entered.await(10, TimeUnit.SECONDS)).as("the first store is being closed").isTrue();
            Store second = live.store();
            Files.writeString(file, "max_keys: 20\n" + FIRST);
            assertThat(other.submit(live::reload).get(10, TimeUnit.SECONDS)).as("the next reload, meanwhile")
                    .isEqualTo(LiveConfig.Reload.APPLIED);
            Future<?> closingAll = other.submit(live::close);
            releases.computeIfAbsent(second, s -> new CountDownLatch(1)).countDown(); // close() closes it itself
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!closed.contains(second)) {
                assertThat(System.nanoTime()).as("the second store closed by close()").isLessThan(deadline);
                Thread.sleep(10);
            }
            Thread.sleep(100);
            assertThat(closingAll).as("close() while the first store is still being closed by its look").isNotDone();
            assertThat(closed).containsExactly(second);
            releases.computeIfAbsent(first, s -> new CountDownLatch(1)).countDown();
            closingAll.get(10, TimeUnit.SECONDS);
            assertThat(closed).as("both replaced stores, the one its look was closing last")
                    .containsExactly(second, first);
        } finally {
            releases.values().forEach(CountDownLatch::countDown);
            other.shutdownNow();
            LiveConfig.closing = closing;
            LiveConfig.oldStoreGrace = grace;
        }
    }

    /**
     * A policy's own {@code max_keys} gives it a store of its own, as nginx gives each zone its memory: a flood of new
     * keys of another policy, which fills and evicts from the shared store, leaves its keys alone. On one store, the
     * login key rejected below was evicted by the flood, and admitted again.
     */
    @Test
    void aPolicyOfItsOwnMaxKeysKeepsItsKeysThroughAFloodOfAnotherPolicysKeys() throws Exception {
        Files.writeString(file, """
                max_keys: 4
                policies:
                  - name: login
                    key: [ip]
                    algorithm: fixed-window
                    limits: [2/1h]
                    max_keys: 3
                  - name: search
                    key: [ip]
                    algorithm: fixed-window
                    limits: [2/1h]
                """);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        InMemoryStore shared = (InMemoryStore) live.store();
        assertThat(remaining("login", "10.0.0.1")).isEqualTo(1);
        assertThat(remaining("login", "10.0.0.1")).isZero();
        for (int i = 0; i < 100; i++) {
            remaining("search", "10.1.0." + i);
        }
        assertThat(shared.evicted()).as("the flood filled the shared store").isGreaterThanOrEqualTo(96);
        Policies policies = live.policies();
        assertThat(policies.check(policies.policy("login"), "10.0.0.1", 1).toCompletableFuture().get().decision()
                .allowed()).as("the login key kept, still over its limit").isFalse();
        // counted apart, as a pool of its own
        String text = live.metrics().scrape();
        assertThat(text).contains("sluice_store_keys{pool=\"login\"} 1.0", "sluice_store_max_keys{pool=\"login\"} 3.0",
                "sluice_store_evicted_total{pool=\"login\"} 0.0", "sluice_store_max_keys{pool=\"shared\"} 4.0",
                "sluice_store_evicted_total{pool=\"shared\"} " + shared.evicted() + ".0");
        // its own store is bounded as the shared one is: its least recently decided keys leave for new ones
        for (int i = 2; i < 12; i++) {
            remaining("login", "10.0.0." + i);
        }
        assertThat(live.metrics().scrape()).contains("sluice_store_keys{pool=\"login\"} 3.0")
                .containsPattern("sluice_store_evicted_total\\{pool=\"login\"} (8|9|10)\\.0");
    }

    /**
     * A policy's own store is in the process's memory: beside a store the caller gives that is not (Redis, shared by
     * servers), its limit would be each server's alone. Refused, naming the policy (a review found it silent).
     */
    @Test
    void aPolicysOwnStoreIsRefusedBesideAGivenStoreThatIsNotInMemory() throws Exception {
        dev.sluice.server.config.ServerConfig config = dev.sluice.server.config.ConfigLoader.parse("t.yaml",
                "policies:\n  - name: login\n    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n"
                        + "    max_keys: 10\n");
        try (ServerMetrics metrics = new ServerMetrics()) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> LiveConfig.of(config,
                            new dev.sluice.testkit.BrokenStore(), metrics))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("policy login: max_keys 10 gives it an in-memory store of its own, and the store given"
                            + " is a BrokenStore, which its limit would not be shared on");
            try (LiveConfig live = LiveConfig.of(config, new InMemoryStore(), metrics)) {
                assertThat(live.policies().check(live.policies().policy("login"), "k", 1).toCompletableFuture().get()
                        .decision().allowed()).isTrue();
            }
        }
    }

    /**
     * A reload keeps a policy's own store, and its counters, while its name and max_keys stay; a change of its max_keys
     * starts it afresh, as a change of the top-level one does; a change of the top-level one leaves it alone.
     */
    @Test
    void aPolicysOwnStoreIsKeptByAReloadUntilItsMaxKeysChanges() throws Exception {
        String policies = """
                policies:
                  - name: login
                    key: [ip]
                    algorithm: fixed-window
                    limits: [3/1h]
                    max_keys: %d
                """;
        Files.writeString(file, policies.formatted(10));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(remaining("login", "10.0.0.1")).isEqualTo(2);
        Files.writeString(file, "max_keys: 50\n" + policies.formatted(10));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(remaining("login", "10.0.0.1")).as("the shared store changed, not its own").isEqualTo(1);
        Files.writeString(file, "max_keys: 50\n" + policies.formatted(20));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        // said (a review found "changed: login" alike for a typo fixed and for its counts wiped)
        assertThat(log.messages().get(log.messages().size() - 1)).isEqualTo(file + ": reloaded, 1 policy in force;"
                + " changed: login (counts afresh)");
        assertThat(remaining("login", "10.0.0.1")).as("its own max_keys changed: a fresh start").isEqualTo(2);
        Files.writeString(file, "max_keys: 50\n" + policies.formatted(20).replace("    max_keys: 20\n", ""));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(remaining("login", "10.0.0.1")).as("on the shared store now: a fresh start").isEqualTo(2);
        assertThat(((InMemoryStore) live.store()).size()).isEqualTo(1);
    }

    @Test
    void aMissingFileIsRefusedToo() throws Exception {
        Files.delete(file);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.policies().config().policies()).hasSize(3);
        // reported once, not at every look while it stays gone
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.metrics().reloads(false)).isEqualTo(1);
        Files.writeString(file, SECOND);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        Files.delete(file);
        assertThat(live.reload()).as("gone again: a new failure").isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.metrics().reloads(false)).isEqualTo(2);
    }

    @Test
    void theWatcherAppliesAnEditOnlyOnceTwoLooksHaveSeenTheSameText() throws Exception {
        assertThat(live.look()).as("the first look: nothing to compare with").isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.look()).as("the file in force, seen again").isEqualTo(LiveConfig.Reload.UNCHANGED);
        // the first half of SECOND, a file that checks out on its own, as a writer has left it for a moment
        String half = SECOND.substring(0, SECOND.indexOf("  - name: added"));
        Files.writeString(file, half);
        assertThat(live.look()).as("being written").isEqualTo(LiveConfig.Reload.UNCHANGED);
        Files.writeString(file, SECOND);
        assertThat(live.look()).as("written to again since").isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.policies().config().policies()).extracting(p -> p.name())
                .containsExactly("kept", "changed", "slots");
        assertThat(live.look()).as("the same text twice").isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.policies().config().policies()).extracting(p -> p.name())
                .containsExactly("kept", "changed", "added", "slots");
        assertThat(live.metrics().reloads(true)).as("the half file was never applied").isEqualTo(1);

        Files.delete(file);
        assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.look()).as("gone for a period: told once").isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.look()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.metrics().reloads(false)).isEqualTo(1);
    }

    @Test
    void aRunningServerPicksUpAnEditWithinSeconds() throws Exception {
        live.watch(Duration.ofMillis(100));
        try (ApiServer server = ApiServer.start(live, "127.0.0.1", 0)) {
            HttpClient client = HttpClient.newHttpClient();
            HttpRequest policies = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/policies")).build();
            assertThat(client.send(policies, HttpResponse.BodyHandlers.ofString()).body()).doesNotContain("added");
            Files.writeString(file, SECOND);
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            String body;
            do {
                Thread.sleep(50);
                body = client.send(policies, HttpResponse.BodyHandlers.ofString()).body();
            } while (!body.contains("added") && System.nanoTime() < deadline);
            assertThat(body).contains("\"name\":\"added\"");
            String metrics = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            assertThat(metrics).contains("sluice_config_reloads_total{result=\"success\"} 1.0");
        }
    }

    @Test
    void aBadFileAtStartIsRefused() throws Exception {
        Files.writeString(file, "policies: []\n");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> LiveConfig.load(file, new ServerMetrics()))
                .isInstanceOf(ConfigException.class).hasMessage(file + ":1: policies: at least one policy is needed");
    }
}
