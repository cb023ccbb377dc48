package dev.sluice.redis;

import dev.sluice.testkit.redis.RedisCluster;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A store opened on a healthy Cluster decides its very first requests through Redis. A bug a review found: a fresh
 * {@code sluice serve} decided its first second of traffic by the failure policy (700 to 800 requests failed
 * open, or were rejected when failing closed), its breakers opened on a Cluster that was fine: the first calls
 * spent their 50 ms connecting, reloading scripts and running Lettuce's path cold ({@link ClusterPrimer}).
 *
 * <p>The burst is asked in a JVM of its own ({@link ColdBurst}): in this one, earlier tests have warmed the path.
 * Before the fix, 156 and 196 of the 300 decisions failed (two runs), and breakers opened.
 */
class RedisClusterStartTest {
    private static final int BURST = 300;

    @Test
    void theFirstDecisionsOfAFreshStoreComeFromRedis() throws Exception {
        try (RedisCluster cluster = RedisCluster.start(3)) {
            Process process = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-cp", System.getProperty("java.class.path"), ColdBurst.class.getName(), cluster.uri(),
                    Integer.toString(BURST)).redirectErrorStream(true).start();
            String output;
            try {
                assertThat(process.waitFor(2, TimeUnit.MINUTES)).as("the burst ended").isTrue();
                output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            } finally {
                process.destroyForcibly();
            }
            assertThat(process.exitValue()).as(output).isZero();
            // the result's line, wherever it is: the Cluster's client, closed after it is printed, may log Lettuce's
            // warnings after it (a CI run of the same kind of test read one as the result)
            String last = output.lines().filter(line -> line.startsWith(BURST + " ")).reduce((a, b) -> b).orElse(output);
            assertThat(last).as("every decision admitted, by Redis").startsWith(BURST + " ")
                    .contains("failures=0,", "breakerOpenings=0,");
            // the warming read only keys of its own, and left none: the Cluster holds the burst's keys alone
            long keys = 0;
            for (RedisServer node : cluster.nodes()) {
                try (Resp resp = node.connect()) {
                    keys += ((Number) resp.call("DBSIZE")).longValue();
                }
            }
            assertThat(keys).isEqualTo(BURST);
        }
    }
}
