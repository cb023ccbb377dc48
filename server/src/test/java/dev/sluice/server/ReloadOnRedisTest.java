package dev.sluice.server;

import dev.sluice.redis.RedisStore;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.store.Store;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Hot reload with the counters on a real Redis: new store settings open a new connection to the same Redis, whose
 * keys still hold the counts of unchanged policies; an edit that names a Redis nobody answers is refused, and the
 * last good store goes on deciding.
 */
class ReloadOnRedisTest {
    private static final String POLICIES = """
            policies:
              - name: kept
                key: [ip]
                algorithm: gcra
                limits: [3/1h]
              - name: changed
                key: [ip]
                algorithm: sliding-window
                limits: [2/1h]
            """;

    @TempDir
    Path dir;

    private static long remaining(LiveConfig live, String policy, String key) throws Exception {
        Policies policies = live.policies();
        return policies.check(policies.policy(policy), key, 1).toCompletableFuture().get().decision().remaining();
    }

    /** A port nothing listens on: one found free and let go could be taken meanwhile (a review found it). */
    private static int unusedPort() {
        return 1;
    }

    @Test
    void anEditKeepsTheCountsOnRedisAndAnUnreachableStoreIsRefused() throws Exception {
        try (RedisServer redis = RedisServer.start(); Resp resp = redis.connect()) {
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + redis.uri() + "\nstore_timeout: 10s\n" + POLICIES);
            ServerMetrics metrics = new ServerMetrics();
            try (LiveConfig live = LiveConfig.load(file, metrics)) {
                assertThat(remaining(live, "kept", "10.0.0.1")).isEqualTo(2);
                assertThat(remaining(live, "changed", "10.0.0.1")).isEqualTo(1);
                Store first = live.store();

                Files.writeString(file, "store: " + redis.uri() + "\nstore_timeout: 11s\n"
                        + POLICIES.replace("[2/1h]", "[4/1h]"));
                try (dev.sluice.testkit.LogCapture log = dev.sluice.testkit.LogCapture.of("sluice")) {
                    assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                    assertThat(log.messages()).containsExactly(file + ": reloaded, 2 policies in force; changed:"
                            + " changed (counts afresh); store opened anew: " + redis.uri());
                }
                assertThat(live.store()).as("new settings, a new connection").isNotSameAs(first);
                assertThat(remaining(live, "kept", "10.0.0.1")).as("the count Redis kept").isEqualTo(1);
                assertThat(remaining(live, "changed", "10.0.0.1")).as("new limits: a fresh start").isEqualTo(3);
                assertThat((List<?>) resp.call("KEYS", "sluice:{changed@*")).as("old limits' key and new")
                        .hasSize(2);

                Store good = live.store();
                Files.writeString(file, "store: redis://127.0.0.1:" + unusedPort() + "\n" + POLICIES);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
                assertThat(live.store()).isSameAs(good);
                assertThat(remaining(live, "kept", "10.0.0.1")).as("still decided on the good Redis").isZero();
                assertThat(metrics.reloads(true)).isEqualTo(1);
                assertThat(metrics.reloads(false)).isEqualTo(1);
            }
        }
    }
    /**
     * Found by trying serve: a change of on_store_failure opened a new store, which must reach Redis, so a server
     * failing closed through an outage could not be switched to open until Redis came back. The policy is now
     * changed on the store in use, at once, Redis down or not.
     */
    @Test
    void theFailurePolicyChangesWhileRedisIsDown() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + redis.uri() + "\nstore_timeout: 10s\non_store_failure: closed\n" + POLICIES);
            try (LiveConfig live = LiveConfig.load(file, new ServerMetrics())) {
                Store store = live.store();
                assertThat(remaining(live, "kept", "10.0.0.3")).isEqualTo(2);
                redis.kill();
                Policies closed = live.policies();
                assertThat(closed.check(closed.policy("kept"), "10.0.0.3", 1).toCompletableFuture().get().decision()
                        .allowed()).as("failing closed").isFalse();
                Files.writeString(file, "store: " + redis.uri() + "\nstore_timeout: 10s\non_store_failure: open\n" + POLICIES);
                try (dev.sluice.testkit.LogCapture log = dev.sluice.testkit.LogCapture.of("sluice")) {
                    assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                    assertThat(log.messages()).containsExactly(file + ": reloaded, 2 policies in force;"
                            + " on_store_failure: open");
                }
                assertThat(live.store()).as("the same store, its policy changed").isSameAs(store);
                Policies open = live.policies();
                assertThat(open.check(open.policy("kept"), "10.0.0.3", 1).toCompletableFuture().get().decision()
                        .allowed()).as("failing open").isTrue();
            }
        }
    }

    /** An edit to a Redis that is not up yet is reported once, tried again at each look, and applied when it is. */
    @Test
    void anEditToARedisNotUpYetIsAppliedWhenItIs() throws Exception {
        try (RedisServer first = RedisServer.start(); RedisServer later = RedisServer.start()) {
            later.kill();
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + first.uri() + "\nstore_timeout: 10s\n" + POLICIES);
            ServerMetrics metrics = new ServerMetrics();
            try (LiveConfig live = LiveConfig.load(file, metrics)) {
                Store good = live.store();
                Files.writeString(file, "store: " + later.uri() + "\nstore_timeout: 10s\n" + POLICIES);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
                assertThat(live.reload()).as("tried again, not reported again").isEqualTo(LiveConfig.Reload.UNCHANGED);
                assertThat(live.store()).isSameAs(good);
                assertThat(metrics.reloads(false)).isEqualTo(1);

                later.restart();
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).isNotSameAs(good);
                assertThat(live.policies().config().store()).isEqualTo(later.uri());
                assertThat(remaining(live, "kept", "10.0.0.2")).isEqualTo(2);
                try (Resp resp = later.connect()) {
                    assertThat((List<?>) resp.call("KEYS", "sluice:{kept@*")).as("decided on the Redis now up").hasSize(1);
                }
                assertThat(metrics.reloads(true)).isEqualTo(1);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
            }
        }
    }

    /**
     * {@code store_password_file}: the password from a file, as Kubernetes mounts a Secret, watched as the file is: a
     * password rotated in place opens a new store with it, no edit of the configuration. A past weakness: the password
     * could only be written in the address, in the file.
     */
    @Test
    void aPasswordFromAFileIsUsedAndARotatedOneOpensANewStore() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            try (Resp resp = redis.connect()) {
                resp.call("CONFIG", "SET", "requirepass", "first secret");
            }
            Files.writeString(dir.resolve("password"), "first secret\n"); // as a Secret written by hand often ends
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + redis.uri() + "\nstore_timeout: 10s\nstore_password_file: password\n" + POLICIES);
            try (LiveConfig live = LiveConfig.load(file, new ServerMetrics())) {
                assertThat(remaining(live, "kept", "10.0.0.3")).isEqualTo(2);
                assertThat(live.policies().config().toString()).doesNotContain("first secret");
                Store before = live.store();
                try (Resp resp = redis.connect()) {
                    resp.call("AUTH", "first secret");
                    resp.call("CONFIG", "SET", "requirepass", "second secret");
                }
                Files.writeString(dir.resolve("password"), "second secret");
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).isNotSameAs(before);
                assertThat(remaining(live, "kept", "10.0.0.3")).as("the same Redis, its count kept").isEqualTo(1);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
            }
        }
    }

    /**
     * A call that took the policies before a reload to another store is decided on the old store to its end, however
     * long that takes: the old store is closed once it is done, not a fixed time after the reload. A review found a
     * call of many descriptors on a slow Redis outlast the 5 s, and each charge after the close fail ("the Redis store
     * ... is closed"); the call was answered INTERNAL, which Envoy lets through.
     */
    @Test
    void aCallUnderWayKeepsTheReplacedStoreOpenUntilItEnds() throws Exception {
        Duration grace = LiveConfig.oldStoreGrace;
        LiveConfig.oldStoreGrace = Duration.ofMillis(100);
        AtomicBoolean slowing = new AtomicBoolean(true);
        try (RedisServer slow = RedisServer.start(); RedisServer other = RedisServer.start()) {
            Path file = dir.resolve("sluice.yaml");
            // a timeout no charge comes near (a charge waits for one script of 40 ms), so that each is Redis's
            Files.writeString(file, "store: " + slow.uri() + "\nstore_timeout: 2s\n" + POLICIES);
            try (LiveConfig live = LiveConfig.load(file, new ServerMetrics())) {
                RedisStore old = (RedisStore) live.store();
                Policies before = live.policies();
                List<Policies.Charge> charges = new ArrayList<>();
                for (int i = 0; i < 200; i++) {
                    charges.add(new Policies.Charge(before.policy("kept"), "10.1.0." + i, 1));
                }
                Thread busy = new Thread(() -> { // a Redis slow to answer: each call waits for a script of 40 ms
                    try (Resp resp = slow.connect()) {
                        while (slowing.get()) { // 40 ms on Redis's clock, however fast the machine (not a loop count)
                            resp.call("EVAL", "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2]"
                                    + " repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= 40000"
                                    + " return 1", "0");
                        }
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
                busy.start();
                long started = System.nanoTime();
                CompletableFuture<Verdict> call = before.decide(charges).toCompletableFuture();

                Files.writeString(file, "store: " + other.uri() + "\n" + POLICIES);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                assertThat(live.store()).isNotSameAs(old);

                Verdict verdict = call.get(60, TimeUnit.SECONDS);
                long tookMillis = (System.nanoTime() - started) / 1_000_000;
                slowing.set(false);
                busy.join();
                assertThat(tookMillis).as("the call outlasted the old store's grace and timeout").isGreaterThan(2_100);
                assertThat(verdict.checked()).hasSize(200);
                assertThat(verdict.checked()).allSatisfy(checked -> {
                    assertThat(checked.decision().allowed()).isTrue();
                    assertThat(checked.decision().storeFailed()).as("decided by Redis").isFalse();
                });
                long closedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (old.healthy() && System.nanoTime() - closedBy < 0) {
                    Thread.sleep(50);
                }
                assertThat(old.healthy()).as("closed once the call ended").isFalse();
            } finally {
                slowing.set(false);
            }
        } finally {
            LiveConfig.oldStoreGrace = grace;
        }
    }

    /**
     * Closing the configuration closes a store replaced moments before at once, with the one in force: its threads
     * outlived a servlet filter's {@code destroy()} by seconds, into the application's undeployment (a review found
     * it).
     */
    @Test
    void closingClosesAStoreJustReplaced() throws Exception {
        try (RedisServer first = RedisServer.start(); RedisServer second = RedisServer.start()) {
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + first.uri() + "\n" + POLICIES);
            LiveConfig live = LiveConfig.load(file, new ServerMetrics());
            RedisStore replaced = (RedisStore) live.store();
            Files.writeString(file, "store: " + second.uri() + "\n" + POLICIES);
            assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
            RedisStore current = (RedisStore) live.store();
            assertThat(replaced.healthy()).as("kept open for the decisions under way").isTrue();
            live.close();
            assertThat(current.healthy()).isFalse();
            assertThat(replaced.healthy()).as("closed with the configuration").isFalse();
        }
    }

    /**
     * A {@code /v1/check} whose body comes after a reload to another store is decided by the policies in force when
     * the body is read: a review found the policies taken as the head came, their store closed by the time a slow
     * body had arrived, and the check answered 500.
     */
    @Test
    void aCheckWhoseBodyComesAfterAReloadIsDecidedOnTheNewStore() throws Exception {
        Duration grace = LiveConfig.oldStoreGrace;
        LiveConfig.oldStoreGrace = Duration.ofMillis(100);
        try (RedisServer first = RedisServer.start(); RedisServer second = RedisServer.start()) {
            Path file = dir.resolve("sluice.yaml");
            Files.writeString(file, "store: " + first.uri() + "\n" + POLICIES);
            try (LiveConfig live = LiveConfig.load(file, new ServerMetrics());
                 dev.sluice.server.http.ApiServer api = dev.sluice.server.http.ApiServer.start(live, "127.0.0.1", 0);
                 java.net.Socket client = new java.net.Socket("127.0.0.1", api.port())) {
                RedisStore old = (RedisStore) live.store();
                String body = "{\"policy\":\"kept\",\"key\":\"10.9.0.1\"}";
                client.getOutputStream().write(("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + "Content-Length: " + body.length() + "\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                client.getOutputStream().flush();
                Thread.sleep(200); // the head read

                Files.writeString(file, "store: " + second.uri() + "\n" + POLICIES);
                assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                long closedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (old.healthy() && System.nanoTime() - closedBy < 0) {
                    Thread.sleep(50);
                }
                assertThat(old.healthy()).as("the old store closed, no decision under way").isFalse();

                client.getOutputStream().write(body.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                client.getOutputStream().flush();
                client.setSoTimeout(5_000);
                String answer = new String(client.getInputStream().readNBytes(12), java.nio.charset.StandardCharsets.US_ASCII);
                assertThat(answer).isEqualTo("HTTP/1.1 200");
                try (Resp resp = second.connect()) {
                    assertThat((List<?>) resp.call("KEYS", "sluice:{kept@*")).as("decided on the new store").hasSize(1);
                }
            }
        } finally {
            LiveConfig.oldStoreGrace = grace;
        }
    }
}
