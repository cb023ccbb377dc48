package dev.sluice.server;

import dev.sluice.server.config.ConfigException;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A Redis that answers but can decide nothing is refused at start and on reload, with Redis's own reason. A review
 * started a server on a user without EVALSHA and on a replica: each said it was serving and healthy, and admitted
 * every request uncounted by its failure policy.
 */
class StoreProbeTest {
    private static final String POLICY = "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [5/1m]\n";

    @TempDir
    Path dir;

    @Test
    void aUserWithoutScriptsAKeyPatternOfItsOwnOrAReplicaIsRefusedNamingWhy() throws Exception {
        try (RedisServer redis = RedisServer.start(); RedisServer primary = RedisServer.start()) {
            try (Resp resp = redis.connect()) {
                resp.call("ACL", "SETUSER", "nosha", "on", ">pw", "~*", "+@all", "-evalsha", "-eval");
                resp.call("ACL", "SETUSER", "otherkeys", "on", ">pw", "~other:*", "+@all");
                resp.call("ACL", "SETUSER", "fine", "on", ">pw", "~sluice:*", "+@all");
            }
            String at = "127.0.0.1:" + redis.port();
            assertRefused("redis://nosha:pw@" + at, "redis://nosha:****@" + at, "NOPERM");
            assertRefused("redis://otherkeys:pw@" + at, "redis://otherkeys:****@" + at, "NOPERM");
            try (LiveConfig live = load("redis://fine:pw@" + at)) {
                assertThat(live.policies().check(live.policies().policy("p"), "k", 1).toCompletableFuture().get()
                        .decision().remaining()).as("a user of sluice:* keys decides").isEqualTo(4);
            }
            try (Resp resp = redis.connect()) {
                assertThat(resp.call("KEYS", "sluice:{sluice-probe-*")).as("the probe's keys are removed")
                        .isEqualTo(java.util.List.of());
                resp.call("REPLICAOF", "127.0.0.1", Integer.toString(primary.port()));
            }
            // the script's write refused: "... -READONLY You can't write against a read only replica."
            assertRefused(redis.uri(), redis.uri(), "READONLY You can't write against a read only replica");
        }
    }

    private void assertRefused(String uri, String shown, String reason) throws Exception {
        Path file = Files.writeString(dir.resolve("sluice.yaml"), "store: " + uri + "\n" + POLICY);
        assertThatThrownBy(() -> LiveConfig.load(file, new ServerMetrics())).isInstanceOf(ConfigException.class)
                .hasMessageStartingWith(file + ":1: store " + shown + ": cannot decide: ").hasMessageContaining(reason);
    }

    private LiveConfig load(String uri) throws Exception {
        return LiveConfig.load(Files.writeString(dir.resolve("sluice.yaml"), "store: " + uri + "\n" + POLICY),
                new ServerMetrics());
    }
}
