package dev.sluice.cli;

import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisCluster;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code bin/sluice simulate --store redis://...} and {@code redis-cluster://...} print byte for byte what the
 * in-memory store prints on the same trace, with the trace's time standing in for the server's clock.
 */
class SimulateRedisIT {
    private static RedisServer redis;
    private static RedisCluster cluster;

    @TempDir
    Path dir;

    @BeforeAll
    static void startRedis() throws IOException {
        redis = RedisServer.start();
        cluster = RedisCluster.start(3);
    }

    @AfterAll
    static void stopRedis() throws InterruptedException {
        cluster.close();
        redis.close();
    }

    static Stream<StoreConformance.Scenario> scenarios() {
        return StoreConformance.scenarios();
    }

    private String decisions(List<String> args) throws Exception {
        SimulateLauncherIT.Run run = SimulateLauncherIT.sluice(args, "");
        assertThat(run.status()).as(run.err()).isZero();
        return run.out();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void redisAndTheClusterPrintWhatMemoryPrints(StoreConformance.Scenario scenario) throws Exception {
        Path trace = Files.writeString(dir.resolve("trace.csv"),
                SimulateLauncherIT.csv(SimulateLauncherIT.randomTrace(scenario)));
        String inMemory = decisions(SimulateLauncherIT.simulate(scenario, trace));
        List<String> onRedis = new ArrayList<>(SimulateLauncherIT.simulate(scenario, trace));
        onRedis.addAll(List.of("--store", redis.uri()));
        assertThat(decisions(onRedis)).isEqualTo(inMemory);
        List<String> onCluster = new ArrayList<>(SimulateLauncherIT.simulate(scenario, trace));
        onCluster.addAll(List.of("--store", cluster.uri()));
        assertThat(decisions(onCluster)).isEqualTo(inMemory);
    }

    @Test
    void aRunLeavesNoKeysBehindAndTwoRunsAgree() throws Exception {
        List<String> args = List.of("simulate", "--algorithm", "token-bucket", "--limit", "3/1m", "--refill",
                "interval", "--trace", "-", "--store", redis.uri());
        SimulateLauncherIT.Run first = SimulateLauncherIT.sluice(args, SimulateCommandTest.SEED_WALK);
        SimulateLauncherIT.Run second = SimulateLauncherIT.sluice(args, SimulateCommandTest.SEED_WALK);
        assertThat(first.out()).isEqualTo(SimulateCommandTest.SEED_WALK_DECISIONS);
        assertThat(second.out()).isEqualTo(SimulateCommandTest.SEED_WALK_DECISIONS);
        try (Resp resp = redis.connect()) {
            assertThat(resp.call("DBSIZE")).isEqualTo(0L);
        }
    }

    @Test
    void anUnreachableRedisIsABadStore() throws Exception {
        SimulateLauncherIT.Run run = SimulateLauncherIT.sluice(List.of("simulate", "--algorithm", "gcra", "--limit",
                "10/1s", "--trace", "-", "--store", "redis://127.0.0.1:1"), "t_ms,key\n0,a\n");
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.out()).isEmpty();
        assertThat(run.err()).startsWith("error: --store redis://127.0.0.1:1: cannot connect: ").doesNotContain("\tat ");
        assertThat(run.err().lines().count()).isEqualTo(1);
    }
}
