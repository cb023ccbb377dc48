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

    /**
     * A run stopped halfway ({@code SIGTERM}, as a Ctrl-C's {@code SIGINT}) writes nothing, and cleans up after
     * itself: its held decisions removed, its keys on Redis reset. A review found both left behind: 13 MB in the
     * temporary directory, and thousands of keys on Redis for 52 days.
     */
    @Test
    void aRunStoppedHalfwayLeavesNoKeysNorFilesBehind() throws Exception {
        Path temporary = Files.createDirectory(dir.resolve("tmp"));
        ProcessBuilder builder = new ProcessBuilder(SimulateLauncherIT.ROOT.resolve("bin/sluice").toString(), "simulate",
                "--algorithm", "sliding-log", "--limit", "5/52d", "--trace", "-", "--store", redis.uri())
                .directory(SimulateLauncherIT.ROOT.toFile()).redirectOutput(dir.resolve("out.txt").toFile())
                .redirectError(dir.resolve("err.txt").toFile());
        builder.environment().put("SLUICE_JAVA_OPTS", "-Djava.io.tmpdir=" + temporary);
        Process process = builder.start();
        // a trace that does not end: lines until the process is gone
        Thread feeding = new Thread(() -> {
            try (java.io.Writer trace = new java.io.OutputStreamWriter(process.getOutputStream(),
                    java.nio.charset.StandardCharsets.UTF_8)) {
                trace.write("t_ms,key\n");
                for (long i = 0; ; i++) {
                    trace.write(i + ",user-" + i % 50 + "\n");
                    if (i % 100 == 0) {
                        trace.flush();
                    }
                }
            } catch (IOException gone) {
                // the process has ended
            }
        });
        feeding.start();
        try (Resp resp = redis.connect()) {
            long giveUp = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
            while ((Long) resp.call("DBSIZE") < 50) {
                assertThat(System.nanoTime()).as("deciding on Redis within 30 s").isLessThan(giveUp);
                Thread.sleep(20);
            }
            try (var held = Files.list(temporary)) {
                assertThat(held.toList()).as("the decisions held until the trace's end").hasSize(1);
            }
            process.destroy(); // SIGTERM
            assertThat(process.waitFor(20, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            feeding.join(10_000);
            assertThat(Files.readString(dir.resolve("err.txt"))).matches("error: stopped at line \\d+ of the trace;"
                    + " nothing written\n");
            assertThat(Files.readString(dir.resolve("out.txt"))).isEmpty();
            assertThat(resp.call("DBSIZE")).as("the run's keys reset").isEqualTo(0L);
            try (var held = Files.list(temporary)) {
                assertThat(held.toList()).as("the held decisions removed").isEmpty();
            }
        } finally {
            process.destroyForcibly();
        }
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

    /**
     * {@code --store-password-env}: the password of a Redis that asks for one, from the environment, kept off the
     * command line every user of the machine can read (a review found no other way than the address).
     */
    @Test
    void aPasswordComesFromTheEnvironment() throws Exception {
        try (RedisServer guarded = RedisServer.start()) {
            try (dev.sluice.testkit.redis.Resp resp = guarded.connect()) {
                resp.call("CONFIG", "SET", "requirepass", "s3cret-from-env");
            }
            List<String> args = List.of("simulate", "--algorithm", "gcra", "--limit", "1/1s", "--trace", "-",
                    "--store", guarded.uri(), "--store-password-env", "SLUICE_TEST_PASSWORD");
            SimulateLauncherIT.Run run = SimulateLauncherIT.sluice(args, "t_ms,key\n0,a\n0,a\n",
                    java.util.Map.of("SLUICE_TEST_PASSWORD", "s3cret-from-env"));
            assertThat(run.status()).as(run.err()).isZero();
            assertThat(run.out().lines().skip(1).map(line -> line.split(",")[3])).containsExactly("true", "false");
            SimulateLauncherIT.Run without = SimulateLauncherIT.sluice(args.subList(0, 9), "t_ms,key\n0,a\n");
            assertThat(without.status()).isEqualTo(2);
            assertThat(without.err()).contains("NOAUTH").doesNotContain("s3cret");
            SimulateLauncherIT.Run unset = SimulateLauncherIT.sluice(args, "t_ms,key\n0,a\n");
            assertThat(unset.status()).isEqualTo(2);
            assertThat(unset.err()).isEqualTo("error: --store-password-env SLUICE_TEST_PASSWORD: no such environment"
                    + " variable, or an empty one\n");
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
