package dev.sluice.cli;

import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.algorithm.Rule;
import dev.sluice.testkit.ReferenceModel;
import dev.sluice.testkit.StoreConformance;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code bin/sluice simulate} end to end, as a user runs it: a separate process through the launcher, on
 * the seeds' examples, on bad input, and on random traces whose every column must be the spec's answer as
 * the {@link ReferenceModel} gives it.
 */
class SimulateLauncherIT {
    static final Path ROOT = Path.of(System.getProperty("user.dir")).getParent();

    @TempDir
    Path dir;

    record Run(int status, String out, String err) {
    }

    static Run sluice(List<String> args, String stdin) throws IOException, InterruptedException {
        return sluice(args, stdin, java.util.Map.of());
    }

    /** {@link #sluice(List, String)} with {@code environment} added to this process's. */
    static Run sluice(List<String> args, String stdin, java.util.Map<String, String> environment)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(ROOT.resolve("bin/sluice").toString());
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).directory(ROOT.toFile());
        builder.environment().putAll(environment);
        Process process = builder.start();
        process.getOutputStream().write(stdin.getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().close();
        // read both streams fully before waiting: a large output must not block the process
        var out = process.getInputStream().readAllBytes();
        var err = process.getErrorStream().readAllBytes();
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).as("sluice finished").isTrue();
        return new Run(process.exitValue(), new String(out, StandardCharsets.UTF_8), new String(err, StandardCharsets.UTF_8));
    }

    @Test
    void theSeedsTokenBucketWalk() throws Exception {
        Run run = sluice(List.of("simulate", "--algorithm", "token-bucket", "--limit", "3/1m", "--refill", "interval",
                "--trace", "-"), SimulateCommandTest.SEED_WALK);
        assertThat(run.err()).isEqualTo(SimulateCommandTest.SEED_WALK_SUMMARY);
        assertThat(run.status()).isZero();
        assertThat(run.out()).isEqualTo(SimulateCommandTest.SEED_WALK_DECISIONS);
    }

    @Test
    void theSeedsSlidingWindowEstimate() throws Exception {
        // 84 in the previous hour; 36 and then 1 at 15 minutes in: 84·0.75 + 37 = 100; the next one is over
        Run run = sluice(List.of("simulate", "--algorithm", "sliding-window", "--limit", "100/1h", "--trace", "-"),
                "t_ms,key,cost\n0,k,84\n4500000,k,36\n4500000,k,1\n4500000,k,1\n");
        assertThat(run.out()).isEqualTo("""
                t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
                0,k,84,true,16,0,7200000,0
                4500000,k,36,true,1,0,6300000,0
                4500000,k,1,true,0,0,6300000,0
                4500000,k,1,false,0,42858,6300000,0
                """);
    }

    @Test
    void theSeedsFixedWindowOfFiveWithFourThenSevenRequests() throws Exception {
        StringBuilder trace = new StringBuilder("t_ms,key\n");
        for (int i = 0; i < 4; i++) {
            trace.append(i * 1000).append(",k\n");
        }
        for (int i = 0; i < 7; i++) {
            trace.append(10_000 + i * 1000).append(",k\n");
        }
        Run run = sluice(List.of("simulate", "--algorithm", "fixed-window", "--limit", "5/10s", "--trace", "-"),
                trace.toString());
        // every column, not the decisions alone (a review found only allowed checked): windows of 10 s from t = 0
        assertThat(run.out()).isEqualTo("""
                t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
                0,k,1,true,4,0,10000,0
                1000,k,1,true,3,0,9000,0
                2000,k,1,true,2,0,8000,0
                3000,k,1,true,1,0,7000,0
                10000,k,1,true,4,0,10000,0
                11000,k,1,true,3,0,9000,0
                12000,k,1,true,2,0,8000,0
                13000,k,1,true,1,0,7000,0
                14000,k,1,true,0,0,6000,0
                15000,k,1,false,0,5000,5000,0
                16000,k,1,false,0,4000,4000,0
                """);
        assertThat(run.err()).isEqualTo("k: 9 admitted, 2 rejected\ntotal: 9 admitted, 2 rejected, 1 key\n");
    }

    @Test
    void badInputGivesOneLineNamingFileAndLineAndExitStatusTwo() throws Exception {
        Path trace = Files.writeString(dir.resolve("trace.csv"), "t_ms,key,cost\n0,a,1\n5,a,-3\n");
        Run run = sluice(List.of("simulate", "--algorithm", "gcra", "--limit", "10/1s", "--trace", trace.toString()), "");
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.out()).isEmpty();
        assertThat(run.err()).isEqualTo("error: " + trace + ":3: cost must be a whole number >= 0, got \"-3\"\n");

        Run badLimit = sluice(List.of("simulate", "--algorithm", "gcra", "--limit", "10/0s", "--trace", "-"), "t_ms,key\n");
        assertThat(badLimit.status()).isEqualTo(2);
        assertThat(badLimit.err()).isEqualTo("error: --limit: bad limit \"10/0s\": period must be > 0, got \"0s\"\n");
    }

    static Stream<StoreConformance.Scenario> scenarios() {
        return StoreConformance.scenarios();
    }

    /** A random trace for {@code scenario}, in milliseconds as simulate reads it. */
    static List<TraceRequest> randomTrace(StoreConformance.Scenario scenario) {
        Random random = new Random(scenario.name().hashCode());
        long period = scenario.longestPeriod() / 1_000_000;
        long capacity = scenario.limits().stream().mapToLong(l -> Math.max(l.amount(), l.burst())).max().orElseThrow();
        List<TraceRequest> trace = new ArrayList<>();
        long t = 1_700_000_000_000L;
        for (int i = 0; i < 400; i++) {
            t += switch (random.nextInt(5)) {
                case 0, 1 -> 0;
                case 2 -> random.nextInt(50);
                case 3 -> random.nextInt((int) period);
                default -> period + random.nextInt(3) - 1;
            };
            long cost = random.nextInt(8) == 0 ? random.nextInt((int) capacity + 2) : 1;
            trace.add(new TraceRequest(t, "user_" + random.nextInt(3), cost));
        }
        return trace;
    }

    static String csv(List<TraceRequest> trace) {
        StringBuilder csv = new StringBuilder("t_ms,key,cost\n");
        for (TraceRequest request : trace) {
            csv.append(request.millis()).append(',').append(request.key()).append(',').append(request.cost()).append('\n');
        }
        return csv.toString();
    }

    /** The arguments of {@code sluice simulate} for {@code scenario}, reading {@code trace}. */
    static List<String> simulate(StoreConformance.Scenario scenario, Path trace) {
        List<String> args = new ArrayList<>(List.of("simulate", "--algorithm", scenario.algorithm().label()));
        for (Limit limit : scenario.limits()) {
            args.add("--limit");
            args.add(limit.toString());
        }
        if (scenario.mode() != Mode.REJECT) {
            args.addAll(List.of("--mode", scenario.mode().label()));
        }
        if (scenario.mode() == Mode.DELAY || scenario.mode() == Mode.SHAPING && scenario.maxDelayNanos() != Rule.NO_MAX_DELAY) {
            args.addAll(List.of("--max-delay", DurationFormat.format(scenario.maxDelayNanos())));
        }
        args.addAll(List.of("--trace", trace.toString()));
        return args;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void randomTracesGiveTheSpecsAnswersInEveryColumn(StoreConformance.Scenario scenario) throws Exception {
        ReferenceModel reference = new ReferenceModel(scenario.algorithm(), scenario.limits(), scenario.mode(),
                scenario.maxDelayNanos());
        List<TraceRequest> trace = randomTrace(scenario);
        StringBuilder expected = new StringBuilder("t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms\n");
        for (TraceRequest request : trace) {
            Decision d = reference.decide(request.key(), request.millis() * 1_000_000, request.cost());
            expected.append(request.millis()).append(',').append(request.key()).append(',').append(request.cost())
                    .append(',').append(d.allowed()).append(',').append(d.remaining())
                    .append(',').append(DurationFormat.toMillisCeil(d.retryAfterNanos()))
                    .append(',').append(DurationFormat.toMillisCeil(d.resetAfterNanos()))
                    .append(',').append(DurationFormat.toMillisCeil(d.delayNanos())).append('\n');
        }
        Path file = Files.writeString(dir.resolve("trace.csv"), csv(trace));
        List<String> args = simulate(scenario, file);
        args.addAll(List.of("--out", dir.resolve("decisions.csv").toString()));
        Run run = sluice(args, "");
        assertThat(run.status()).as(run.err()).isZero();
        assertThat(Files.readString(dir.resolve("decisions.csv"))).isEqualTo(expected.toString());
    }
}
