package dev.sluice.redis;

import dev.sluice.testkit.redis.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two separate JVM processes, four threads each, on one key of one Redis: together they never admit more
 * than the limit allows, because every decision is one atomic script on the server.
 */
class MultiProcessConcurrencyTest {
    private static final int PROCESSES = 2;
    private static final int THREADS = 4;
    private static final int ATTEMPTS = 2_500;
    private static RedisServer redis;

    @BeforeAll
    static void startRedis() throws IOException {
        redis = RedisServer.start();
    }

    @AfterAll
    static void stopRedis() throws InterruptedException {
        redis.close();
    }

    /**
     * How many requests the processes admitted together. Each is started, connects and says it is ready; all are
     * then told to go at once, and the test checks that their runs overlapped in time: one process finishing
     * before the other began would prove nothing about concurrency.
     */
    private static long admittedByAll(String algorithm, String limit, String key, String time) throws Exception {
        return admittedByAll(redis.uri(), algorithm, limit, key, time);
    }

    private static long admittedByAll(String uri, String algorithm, String limit, String key, String time)
            throws Exception {
        List<Process> processes = new ArrayList<>();
        List<BufferedReader> outputs = new ArrayList<>();
        for (int p = 0; p < PROCESSES; p++) {
            Process process = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-cp", System.getProperty("java.class.path"), Hammer.class.getName(), uri, algorithm, limit,
                    key, Integer.toString(THREADS), Integer.toString(ATTEMPTS), time)
                    .redirectErrorStream(true).start();
            processes.add(process);
            outputs.add(new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)));
        }
        try {
            for (int p = 0; p < PROCESSES; p++) {
                BufferedReader output = outputs.get(p);
                String said = CompletableFuture.supplyAsync(() -> {
                    StringBuilder before = new StringBuilder();
                    try {
                        for (String line; (line = output.readLine()) != null; ) {
                            if (line.equals("ready")) {
                                return line;
                            }
                            before.append(line).append('\n');
                        }
                    } catch (IOException e) {
                        before.append(e);
                    }
                    return before.toString();
                }).get(2, TimeUnit.MINUTES);
                assertThat(said).as("process %d said ready", p).isEqualTo("ready");
            }
            for (Process process : processes) {
                process.getOutputStream().write("go\n".getBytes(StandardCharsets.UTF_8));
                process.getOutputStream().flush();
            }
            long admitted = 0;
            long latestFirst = Long.MIN_VALUE;
            long earliestLast = Long.MAX_VALUE;
            for (int p = 0; p < PROCESSES; p++) {
                Process process = processes.get(p);
                assertThat(process.waitFor(2, TimeUnit.MINUTES)).as("process %d ended", p).isTrue();
                String output = outputs.get(p).lines().reduce("", (a, b) -> a + b + "\n").trim();
                assertThat(process.exitValue()).as(output).isZero();
                // the line of the result, wherever it is: a Cluster's client, closed after it is printed, may log
                // Lettuce's warnings after it (a CI run read "WARNING:" as the count)
                String[] result = output.lines().filter(line -> line.startsWith("result ")).reduce((a, b) -> b)
                        .orElseThrow(() -> new AssertionError("process said no result:\n" + output)).split(" ");
                admitted += Long.parseLong(result[1]);
                latestFirst = Math.max(latestFirst, Long.parseLong(result[2]));
                earliestLast = Math.min(earliestLast, Long.parseLong(result[3]));
            }
            assertThat(latestFirst).as("every process began before any had finished").isLessThan(earliestLast);
            return admitted;
        } finally {
            processes.forEach(Process::destroyForcibly);
        }
    }

    /** Every algorithm; a review found only four proven, each with one limit. */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"fixed-window, 3000/1h", "gcra, 3000/1h", "sliding-window, 3000/1h", "token-bucket, 3000/1h refill=interval",
            "token-bucket, 3000/1h", "sliding-log, 3000/1h", "leaky-bucket, 3000/1h"})
    void exactlyTheLimitAtOneInstant(String algorithm, String limit) throws Exception {
        // 2 processes × 4 threads × 2,500 attempts = 20,000 at one instant of the trace's time
        long admitted = admittedByAll(algorithm, limit, "instant-" + algorithm + "-" + limit, "1763800000000000000");
        assertThat(admitted).isEqualTo(3000);
    }

    /**
     * Stacked limits, all or nothing: at one instant the tighter limit (2000 an hour) admits 2000, and the 18,000
     * it rejects take nothing from the day's 3000; an hour later the hour's limit is fresh and the day's has what is
     * left of it, which a rejection that had charged it would have spent: 1000 in fixed windows (the same day), and
     * for gcra the day's 1000 plus the 125 an hour brings back (one every 28.8 s).
     */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"fixed-window, 1000", "gcra, 1125"})
    void stackedLimitsTakeNothingFromEachOtherUnderContention(String algorithm, long anHourLater) throws Exception {
        String limits = "2000/1h+3000/1d";
        long start = 1_763_800_000_000_000_000L; // 2025-11-22 08:26:40 UTC: an hour later is the same day
        String key = "stacked-" + algorithm;
        assertThat(admittedByAll(algorithm, limits, key, Long.toString(start))).isEqualTo(2000);
        assertThat(admittedByAll(algorithm, limits, key, Long.toString(start + 3_600_000_000_000L)))
                .isEqualTo(anHourLater);
    }

    /** The same on a Redis Cluster of three masters: the key's one slot decides, whichever node a process asks first. */
    @org.junit.jupiter.api.Test
    void exactlyTheLimitAtOneInstantOnACluster() throws Exception {
        try (dev.sluice.testkit.redis.RedisCluster cluster = dev.sluice.testkit.redis.RedisCluster.start(3)) {
            long admitted = admittedByAll(cluster.uri(), "gcra", "3000/1h", "instant-cluster", "1763800000000000000");
            assertThat(admitted).isEqualTo(3000);
        }
    }

    @ParameterizedTest(name = "{0} {1} on the server's clock")
    @CsvSource({"fixed-window, 3000/1d", "gcra, 3000/1d"})
    void neverMoreThanTheLimitOnTheServersClock(String algorithm, String limit) throws Exception {
        long dayBefore = System.currentTimeMillis() / 86_400_000L;
        long admitted = admittedByAll(algorithm, limit, "clock-" + algorithm, "server");
        boolean crossedMidnight = System.currentTimeMillis() / 86_400_000L != dayBefore;
        if (algorithm.equals("gcra")) {
            // one more unit comes back every 28.8 s, and the run takes a few seconds
            assertThat(admitted).isBetween(3000L, 3001L);
        } else {
            // a window of a day starts at midnight UTC: a run across it may see two windows
            assertThat(admitted).isBetween(3000L, crossedMidnight ? 6000L : 3000L);
        }
    }
}
