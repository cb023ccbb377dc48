package dev.sluice.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code sluice simulate} in this JVM: every answer and every refusal of docs/simulate.md. */
class SimulateCommandTest {
    /** The seeds' walk: 3 per minute, refilled every minute, requests at 0, 10, 35, 45 and 60 s. */
    static final String SEED_WALK = "t_ms,key\n0,user_1\n10000,user_1\n35000,user_1\n45000,user_1\n60000,user_1\n";
    static final String SEED_WALK_DECISIONS = """
            t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
            0,user_1,1,true,2,0,60000,0
            10000,user_1,1,true,1,0,50000,0
            35000,user_1,1,true,0,0,25000,0
            45000,user_1,1,false,0,15000,15000,0
            60000,user_1,1,true,2,0,60000,0
            """;
    static final String SEED_WALK_SUMMARY = "user_1: 4 admitted, 1 rejected\ntotal: 4 admitted, 1 rejected, 1 key\n";

    @TempDir
    Path dir;

    /** What a run printed and how it ended. */
    record Run(int status, String out, String err) {
    }

    static Run simulate(String stdin, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        StringWriter err = new StringWriter();
        String[] full = new String[args.length + 1];
        full[0] = "simulate";
        System.arraycopy(args, 0, full, 1, args.length);
        int status = Sluice.run(full, new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)), out,
                new PrintWriter(err, true));
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString());
    }

    private Path file(String name, String content) throws IOException {
        return Files.writeString(dir.resolve(name), content);
    }

    @Test
    void walksTheSeedsTokenBucketWithEveryColumn() {
        Run run = simulate(SEED_WALK,
                "--algorithm", "token-bucket", "--limit", "3/1m", "--refill", "interval", "--trace", "-");
        assertThat(run.status()).isZero();
        assertThat(run.out()).isEqualTo(SEED_WALK_DECISIONS);
        assertThat(run.err()).isEqualTo(SEED_WALK_SUMMARY);
    }

    /**
     * The summary is short, as spec/simulate.md asks: the first 20 keys in the order the trace first names them, then
     * how many more, then the totals of every key.
     */
    @Test
    void theSummaryNamesTheFirstTwentyKeysThenCountsTheRest() {
        StringBuilder trace = new StringBuilder("t_ms,key\n");
        StringBuilder named = new StringBuilder();
        for (int i = 25; i > 0; i--) { // not in the order of their names: the trace's order is kept
            trace.append("0,k").append(i).append('\n').append("0,k").append(i).append('\n');
            if (i > 5) {
                named.append("k").append(i).append(": 1 admitted, 1 rejected\n");
            }
        }
        Run run = simulate(trace.toString(), "--algorithm", "fixed-window", "--limit", "1/1s", "--trace", "-");
        assertThat(run.status()).isZero();
        assertThat(run.err()).isEqualTo(named + "... and 5 more keys\ntotal: 25 admitted, 25 rejected, 25 keys\n");
    }

    /**
     * Two findings of a review: a key holding control characters reached the terminal as they were (an escape
     * sequence that erases the line, a carriage return), so a trace of client keys could rewrite what the summary
     * says; and a peek (cost 0) was counted admitted, where the server counts it peeked.
     */
    @Test
    void theSummaryShowsControlCharactersEscapedAndCountsPeeksApart() {
        Run run = simulate("t_ms,key,cost\n0,\"a\u001b[2K\rall good\",1\n0,b,1\n0,b,0\n0,b,5\n0,b,6\n",
                "--algorithm", "leaky-bucket", "--limit", "5/1s", "--mode", "shaping", "--trace", "-");
        assertThat(run.status()).isZero();
        assertThat(run.err()).isEqualTo("a\\x1b[2K\\x0dall good: 1 admitted, 0 rejected\n"
                + "b: 1 admitted, 2 rejected, 1 peeked\n"
                + "total: 2 admitted, 2 rejected, 1 peeked, 2 keys\n");
        Run bad = simulate("t_ms,key,cost\n0,k,\"1\u001b[31m\"\n", "--algorithm", "gcra", "--limit", "5/1s",
                "--trace", "-");
        assertThat(bad.status()).isEqualTo(2);
        assertThat(bad.err()).doesNotContain("\u001b").contains("\\x1b[31m").hasLineCount(1);
    }

    @Test
    void answersTheSpecsExampleLine() {
        Run run = simulate("t_ms,key,cost\n0,user_1,1\n10000,user_1,1\n",
                "--algorithm", "token-bucket", "--limit", "3/1m", "--trace", "-");
        assertThat(run.out()).isEqualTo("""
                t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
                0,user_1,1,true,2,0,20000,0
                10000,user_1,1,true,1,0,30000,0
                """);
    }

    /** Found by trying the CLI: a trace saved by a spreadsheet starts with a byte-order mark, and was refused. */
    @Test
    void aTraceThatStartsWithAByteOrderMarkIsRead() {
        Run run = simulate("\uFEFFt_ms,key,cost\n0,user_1,1\n",
                "--algorithm", "token-bucket", "--limit", "3/1m", "--trace", "-");
        assertThat(run.status()).isZero();
        assertThat(run.out()).endsWith("0,user_1,1,true,2,0,20000,0\n");
    }

    @Test
    void gcraTenPerMinuteLetsTenThroughThenOneEverySixSeconds() {
        StringBuilder trace = new StringBuilder("t_ms,key\n");
        for (int i = 0; i < 11; i++) {
            trace.append("0,k\n");
        }
        trace.append("6000,k\n");
        Run run = simulate(trace.toString(), "--algorithm", "gcra", "--limit", "10/60s", "--trace", "-");
        String[] lines = run.out().split("\n");
        assertThat(lines).hasSize(13);
        assertThat(lines[1]).isEqualTo("0,k,1,true,9,0,6000,0");
        assertThat(lines[10]).isEqualTo("0,k,1,true,0,0,60000,0");
        assertThat(lines[11]).isEqualTo("0,k,1,false,0,6000,60000,0");
        assertThat(lines[12]).isEqualTo("6000,k,1,true,0,0,60000,0");
    }

    @Test
    void stacksLimitsAndRoundsDurationsUpToWholeMilliseconds() {
        Run run = simulate("t_ms,key,cost\n0,k,3\n0,k,1\n1,k,0\n",
                "--algorithm", "gcra", "--limit", "3/1s", "--limit", "5/7s", "--trace", "-");
        // 3 per second: T = 333.33 ms; 5 per 7 s: T = 1.4 s; the 7-second limit binds the reset
        assertThat(run.out()).isEqualTo("""
                t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
                0,k,3,true,0,0,4200,0
                0,k,1,false,0,334,4200,0
                1,k,0,true,0,0,4199,0
                """);
    }

    @Test
    void delaysAndShapes() {
        Run delay = simulate("t_ms,key\n0,k\n0,k\n0,k\n0,k\n",
                "--algorithm", "gcra", "--limit", "2/1s", "--mode", "delay", "--max-delay", "1s", "--trace", "-");
        assertThat(delay.out()).endsWith("0,k,1,true,1,0,500,0\n0,k,1,true,0,0,1000,0\n"
                + "0,k,1,true,0,0,1500,500\n0,k,1,true,0,0,2000,1000\n");
        Run shaping = simulate("t_ms,key\n0,k\n0,k\n0,k\n",
                "--algorithm", "leaky-bucket", "--limit", "2/1s", "--burst", "3", "--mode", "shaping", "--trace", "-");
        assertThat(shaping.out()).endsWith("0,k,1,true,2,0,500,0\n0,k,1,true,1,0,1000,500\n0,k,1,true,0,0,1500,1000\n");
        Run leakyDelay = simulate("t_ms,key\n0,k\n0,k\n0,k\n",
                "--algorithm", "leaky-bucket", "--limit", "2/1s", "--burst", "3", "--mode", "delay", "--trace", "-");
        assertThat(leakyDelay.status()).isZero();
        assertThat(leakyDelay.err()).isEqualTo(shaping.err());
        assertThat(leakyDelay.out()).as("leaky-bucket's delay is shaping, as in sluice.yaml").isEqualTo(shaping.out());
    }

    @Test
    void readsAndWritesFilesAndQuotedKeys() throws IOException {
        Path trace = file("trace.csv", "key,t_ms,cost\r\n\"a,b\",0,1\r\n\"say \"\"hi\"\"\",5,2\r\n\r\n");
        Path out = dir.resolve("out.csv");
        Run run = simulate("", "--algorithm", "fixed-window", "--limit", "2/1s", "--trace", trace.toString(),
                "--out", out.toString());
        assertThat(run.status()).isZero();
        assertThat(run.out()).isEmpty();
        assertThat(Files.readString(out)).isEqualTo("""
                t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms
                0,"a,b",1,true,1,0,1000,0
                5,"say ""hi\"\"\",2,true,0,0,995,0
                """);
    }

    @Test
    void aBadLineFarIntoTheTraceLeavesTheOutputUntouchedAndNoHeldDecisions() throws IOException {
        // a directory of its own: simulations running elsewhere on the machine hold theirs in the temporary one (a
        // review's, running beside a build, failed this test)
        SimulateCommand.heldIn = Files.createDirectory(dir.resolve("held"));
        try (java.nio.file.WatchService watch = SimulateCommand.heldIn.getFileSystem().newWatchService()) {
            java.nio.file.WatchKey key = SimulateCommand.heldIn.register(watch, java.nio.file.StandardWatchEventKinds.ENTRY_CREATE);
            simulateWithABadLineFarIn();
            // the held decisions were made there, then removed: else "none left" would hold of a directory never used
            java.nio.file.WatchKey heard = watch.poll(10, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(heard).isSameAs(key);
            assertThat(heard.pollEvents()).extracting(event -> event.context().toString())
                    .anyMatch(name -> name.startsWith("sluice-simulate-"));
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        } finally {
            SimulateCommand.heldIn = null;
        }
    }

    private void simulateWithABadLineFarIn() throws IOException {
        StringBuilder lines = new StringBuilder("t_ms,key\n");
        for (int i = 0; i < 50_000; i++) { // decisions past any buffer: they are held in a file until the end
            lines.append(i).append(",user-").append(i % 100).append('\n');
        }
        Path trace = file("trace.csv", lines + "49999,\n");
        Path out = file("out.csv", "what was there\n");
        Run run = simulate("", "--algorithm", "gcra", "--limit", "10/1s", "--trace", trace.toString(),
                "--out", out.toString());
        assertThat(run.err()).isEqualTo("error: " + trace + ":50002: key must not be empty\n");
        assertThat(run.status()).isEqualTo(2);
        assertThat(Files.readString(out)).isEqualTo("what was there\n");
        assertThat(held()).as("the held decisions are removed").isEmpty();

        Files.writeString(trace, lines);
        run = simulate("", "--algorithm", "gcra", "--limit", "10/1s", "--trace", trace.toString(), "--out", out.toString());
        assertThat(run.status()).isZero();
        List<String> written = Files.readAllLines(out);
        assertThat(written).hasSize(50_001).element(50_000).isEqualTo("49999,user-99,1,true,9,0,100,0");
        assertThat(held()).isEmpty();
    }

    /** The files of held decisions in their directory. */
    private static List<Path> held() throws IOException {
        try (java.util.stream.Stream<Path> files = Files.list(SimulateCommand.heldIn)) {
            return files.filter(file -> file.getFileName().toString().startsWith("sluice-simulate-")).toList();
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "a negative cost|t_ms,key,cost\\n0,a,1\\n5,a,-3\\n|<stdin>:3: cost must be a whole number >= 0, got \"-3\"",
            "a cost that overflows|t_ms,key,cost\\n0,a,99999999999999999999\\n|<stdin>:2: cost is too large, got \"99999999999999999999\"",
            "a cost that is not a number|t_ms,key,cost\\n0,a,one\\n|<stdin>:2: cost must be a whole number >= 0, got \"one\"",
            "time going backwards|t_ms,key\\n10,a\\n5,a\\n|<stdin>:3: time goes backwards: t_ms 5 comes after t_ms 10",
            "a time that overflows|t_ms,key\\n4611686018428,a\\n|<stdin>:2: t_ms must be at most 4611686018427, got \"4611686018428\"",
            "a negative time|t_ms,key\\n-1,a\\n|<stdin>:2: t_ms must be a whole number >= 0, got \"-1\"",
            "an empty key|t_ms,key\\n0,\\n|<stdin>:2: key must not be empty",
            "a short line|t_ms,key,cost\\n0,a\\n|<stdin>:2: expected 3 fields, got 2",
            "an unclosed quote|t_ms,key\\n0,\"a\\n|<stdin>:2: field 2: unclosed quote",
            "text after a closing quote|t_ms,key\\n0,\"a\"x\\n|<stdin>:2: field 2: text after its closing quote (a quote inside a quoted field is written twice)",
            "a quote not closed in the header|t_ms,\"key\\n0,a\\n|<stdin>:1: the header line: field 2: unclosed quote",
            "an unknown column|t_ms,key,weight\\n0,a,1\\n|<stdin>:1: unknown column \"weight\": expected t_ms, key and optionally cost",
            "a missing column|key,cost\\na,1\\n|<stdin>:1: missing column \"t_ms\": the header must name t_ms, key and optionally cost",
            "a repeated column|t_ms,key,key\\n0,a,a\\n|<stdin>:1: column \"key\" appears twice",
            "an empty trace||<stdin>:1: the trace is empty; expected the header line t_ms,key,cost",
    })
    void refusesABadTraceBeforeWritingAnything(String problem, String trace, String message) {
        Run run = simulate(trace == null ? "" : trace.replace("\\n", "\n"),
                "--algorithm", "gcra", "--limit", "10/1s", "--trace", "-");
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.out()).isEmpty();
        assertThat(run.err()).isEqualTo("error: " + message + "\n");
    }

    @ParameterizedTest(name = "{1}")
    @CsvSource(delimiter = '|', value = {
            "--algorithm nope --limit 10/1s|--algorithm: unknown algorithm \"nope\": expected one of fixed-window, sliding-log, sliding-window, token-bucket, gcra, leaky-bucket",
            "--algorithm gcra --limit 10/0s|--limit: bad limit \"10/0s\": period must be > 0, got \"0s\"",
            "--algorithm gcra --limit 0/1m|--limit: bad limit \"0/1m\": amount must be between 1 and 1099511627776, got 0",
            "--algorithm gcra --limit abc|--limit: bad limit \"abc\": expected L/P such as 600/1m",
            "--algorithm gcra --limit 10/1s --burst 0|--burst: must be a whole number >= 1, got \"0\"",
            "--algorithm fixed-window --limit 10/1s --burst 5|--burst is for token-bucket, gcra and leaky-bucket, not fixed-window",
            "--algorithm gcra --limit 10/1s --refill interval|--refill is for token-bucket, not gcra",
            "--algorithm token-bucket --limit 10/1s --refill sometimes|--refill: unknown refill \"sometimes\": expected greedy or interval",
            "--algorithm gcra --limit 10/1s --mode delay|--mode delay needs --max-delay",
            "--algorithm gcra --limit 10/1s --max-delay 1s|--max-delay is for --mode delay (and leaky-bucket's shaping)",
            "--algorithm gcra --limit 10/1s --mode delay --max-delay 1.5s|--max-delay: bad duration \"1.5s\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "--algorithm gcra --limit 10/1s --mode delay --max-delay 0s|--max-delay: delay mode needs a max delay > 0 (how long a request may wait), got 0s",
            "--algorithm token-bucket --limit 1099511627776/1ms --refill interval --mode delay --max-delay 3000d|--max-delay: limit 1099511627776/1ms refill=interval: max delay 3000d spans too many refills",
            "--algorithm sliding-log --limit 10/1s --mode delay --max-delay 1s|--mode delay: delay mode is for token-bucket and gcra, not sliding-log",
            "--algorithm leaky-bucket --limit 10/1s --mode delay --max-delay 4000d|--max-delay: duration \"4000d\" is too long (at most 3335d)",
            "--algorithm gcra --limit 10/1s --mode shaping|--mode shaping: shaping mode is for leaky-bucket, not gcra",
            "--algorithm gcra --limit 10/1s --mode sometimes|--mode: unknown mode \"sometimes\": expected reject, delay or shaping",
            "--algorithm gcra --limit 10/1s --store mongo://localhost:1|--store: \"mongo://localhost:1\" is not a store: use memory, redis://HOST:PORT or redis-cluster://HOST:PORT,HOST:PORT",
            "--algorithm gcra --limit 10/1500us --store redis://127.0.0.1:1|--store redis://127.0.0.1:1: limit 10/1500us is beyond the Redis store: its period is not a whole number of milliseconds, the unit the scripts keep times in",
            "--algorithm gcra --limit 10/1s --frob|Unknown option: '--frob'",
            "--limit 10/1s|Missing required option: '--algorithm=ALG'",
    })
    void refusesBadOptionsNamingThem(String options, String message) {
        String[] args = (options + " --trace -").split(" ");
        Run run = simulate("t_ms,key\n0,a\n", args);
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.out()).isEmpty();
        assertThat(run.err()).isEqualTo("error: " + message + "\n");
    }

    /**
     * A limit that gives its own burst or refill is not silently given another by --burst or --refill, and a
     * problem of the limit itself names --limit (it named --mode reject). Past bugs a review found.
     */
    @Test
    void aLimitsOwnBurstOrRefillIsNeitherReplacedNorBlamedOnTheMode() {
        String trace = "t_ms,key\n0,a\n";
        Run burst = simulate(trace, "--algorithm", "gcra", "--limit", "10/1s burst=5", "--burst", "7", "--trace", "-");
        assertThat(burst.status()).isEqualTo(2);
        assertThat(burst.err()).isEqualTo("error: --limit 10/1s burst=5: gives its own burst, and --burst would replace it:"
                + " give it in one place\n");
        Run refill = simulate(trace, "--algorithm", "token-bucket", "--limit", "10/1s refill=interval", "--refill",
                "greedy", "--trace", "-");
        assertThat(refill.status()).isEqualTo(2);
        assertThat(refill.err()).isEqualTo("error: --limit 10/1s refill=interval: gives its own refill, and --refill"
                + " would replace it: give it in one place\n");
        Run named = simulate(trace, "--algorithm", "fixed-window", "--limit", "10/1s burst=5", "--trace", "-");
        assertThat(named.status()).isEqualTo(2);
        assertThat(named.err()).isEqualTo("error: --limit: limit 10/1s burst=5: burst is for token-bucket, gcra and"
                + " leaky-bucket, not fixed-window\n");
        assertThat(simulate(trace, "--algorithm", "gcra", "--limit", "10/1s burst=5", "--trace", "-").status())
                .as("its own burst alone").isZero();
        Run twice = simulate(trace, "--algorithm", "gcra", "--limit", "10/1s", "--limit", "10/1s", "--trace", "-");
        assertThat(twice.status()).isEqualTo(2);
        assertThat(twice.err()).isEqualTo("error: --limit 10/1s: given twice; the same limit twice decides as once\n");
    }

    @Test
    void refusesAMissingFile() {
        Run run = simulate("", "--algorithm", "gcra", "--limit", "10/1s", "--trace", dir.resolve("nope.csv").toString());
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.err()).isEqualTo("error: " + dir.resolve("nope.csv") + ": no such file\n");
    }

    @Test
    void namesTheFileInTraceErrors() throws IOException {
        Path trace = file("trace.csv", "t_ms,key,cost\n" + "0,a,1\n".repeat(12) + "0,a,-3\n");
        Run run = simulate("", "--algorithm", "gcra", "--limit", "10/1s", "--trace", trace.toString());
        assertThat(run.err()).isEqualTo("error: " + trace + ":14: cost must be a whole number >= 0, got \"-3\"\n");
    }
    /** A trace's bytes are UTF-8 or refused by line: read leniently, two keys became one U+FFFD and shared a limit. */
    @Test
    void refusesALineThatIsNotUtf8ByItsNumber() throws IOException {
        Path trace = Files.write(dir.resolve("bytes.csv"), new byte[] {'t', '_', 'm', 's', ',', 'k', 'e', 'y', '\n',
                '0', ',', 'a', '\n', '1', ',', (byte) 0xff, '\n', '2', ',', (byte) 0xfe, '\n'});
        Run run = simulate("", "--algorithm", "fixed-window", "--limit", "1/1s", "--trace", trace.toString());
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.err()).isEqualTo("error: " + trace + ":3: not valid UTF-8\n");
        assertThat(run.out()).isEmpty();
    }

    /** A line that never ends ({@code /dev/zero}) is refused at 1 MiB, not read until the heap runs out. */
    @Test
    void refusesALineLongerThanAMebibyte() throws IOException {
        Path trace = file("long.csv", "t_ms,key\n0," + "k".repeat(TraceLines.MAX_LINE) + "\n");
        Run run = simulate("", "--algorithm", "fixed-window", "--limit", "1/1s", "--trace", trace.toString());
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.err()).isEqualTo("error: " + trace + ":2: a line longer than 1 MiB; a trace line is t_ms,key,cost\n");
    }

    /** A store that is none is refused before the trace is read: a review found stdin drained first. */
    @Test
    void aStoreThatIsNoneIsRefusedBeforeTheTraceIsRead() {
        Run run = simulate("not a trace", "--algorithm", "gcra", "--limit", "1/1s", "--store", "memroy", "--trace", "-");
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.err()).isEqualTo("error: --store: \"memroy\" is not a store: use memory, redis://HOST:PORT or"
                + " redis-cluster://HOST:PORT,HOST:PORT\n");
        // a password from the environment is for Redis, and given one way
        Run memory = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--store-password-env", "PATH", "--trace",
                "-");
        assertThat(memory.err()).isEqualTo("error: --store-password-env: the in-memory store takes no password; it is"
                + " for --store redis://...\n");
        Run twice = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--store", "redis://:pw@127.0.0.1:1",
                "--store-password-env", "PATH", "--trace", "-");
        assertThat(twice.err()).isEqualTo("error: --store-password-env PATH: the store's address has a password of its"
                + " own (redis://:****@127.0.0.1:1); give it one way\n");
        // its password never shown (a review found it printed whole)
        Run secret = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--store", "rediss://:s3cret@h:6380",
                "--trace", "-");
        assertThat(secret.err()).isEqualTo("error: --store: \"rediss://:****@h:6380\" is not a store: use memory,"
                + " redis://HOST:PORT or redis-cluster://HOST:PORT,HOST:PORT\n");
    }

    /**
     * A review found four lines of Lettuce's warnings before the error line when a Cluster's nodes refuse: the one
     * line says it all.
     */
    @Test
    void aClusterThatCannotBeReachedIsOneErrorLine() {
        try (dev.sluice.testkit.LogCapture lettuce = dev.sluice.testkit.LogCapture.of("io.lettuce")) {
            Run run = simulate("t_ms,key\n0,a\n", "--algorithm", "gcra", "--limit", "1/1s", "--store",
                    "redis-cluster://127.0.0.1:1,127.0.0.1:2", "--trace", "-");
            assertThat(run.status()).isEqualTo(2);
            assertThat(run.err()).startsWith("error: --store redis-cluster://127.0.0.1:1,127.0.0.1:2: cannot connect: ")
                    .hasLineCount(1);
            assertThat(lettuce.messages()).isEmpty();
        }
    }

    @Test
    void everyCommandTellsItsVersion() {
        for (String command : List.of("simulate", "check", "serve", "gateway")) {
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            int status = Sluice.run(new String[] {command, "--version"}, new ByteArrayInputStream(new byte[0]), out,
                    new PrintWriter(new StringWriter(), true));
            assertThat(status).isZero();
            assertThat(out.toString(StandardCharsets.UTF_8)).as(command).isEqualTo("sluice 0.1.0\n");
        }
    }

    @Test
    void refusesToWriteTheDecisionsOverTheTrace() throws IOException {
        Path trace = file("both.csv", "t_ms,key\n0,a\n");
        Run run = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", trace.toString(), "--out",
                dir.resolve(".").resolve("both.csv").toString());
        assertThat(run.status()).isEqualTo(2);
        assertThat(run.err()).isEqualTo("error: --out " + dir.resolve(".").resolve("both.csv")
                + ": the trace itself; the decisions would overwrite it\n");
        assertThat(Files.readString(trace)).isEqualTo("t_ms,key\n0,a\n");
    }

    @Test
    void saysWhyTheDecisionsCouldNotBeWritten() throws IOException {
        Path trace = file("t.csv", "t_ms,key\n0,a\n");
        // a file there is judged by its own permission, not its directory's (a review found /dev/null refused)
        assertThat(simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", trace.toString(), "--out",
                "/dev/null").status()).isZero();
        Run full = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", trace.toString(), "--out", "/dev/full");
        assertThat(full.status()).isEqualTo(2);
        assertThat(full.err()).isEqualTo("error: /dev/full: cannot write the decisions: No space left on device\n");
        // refused before the trace is read (a review found them told after the whole trace was decided): from a
        // stdin that is not a trace, nothing would be read at all
        Run nowhere = simulate("not a trace", "--algorithm", "gcra", "--limit", "1/1s", "--trace", "-", "--out",
                dir.resolve("no/such/dir/out.csv").toString());
        assertThat(nowhere.err()).isEqualTo("error: --out " + dir.resolve("no/such/dir/out.csv") + ": no such directory "
                + dir.resolve("no/such/dir") + "\n");
        Run intoDirectory = simulate("not a trace", "--algorithm", "gcra", "--limit", "1/1s", "--trace", "-", "--out",
                dir.toString());
        assertThat(intoDirectory.status()).isEqualTo(2);
        assertThat(intoDirectory.err()).isEqualTo("error: --out " + dir + ": a directory; give a file for the decisions\n");
        Run nul = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", "a\u0000b.csv");
        assertThat(nul.status()).isEqualTo(2);
        assertThat(nul.err()).startsWith("error: --trace a?b.csv: not a file name this system can use (Nul character not"
                + " allowed; file names are read as ");
        Run empty = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", "");
        assertThat(empty.err()).isEqualTo("error: --trace: empty; give the trace's file, or - for standard input\n");
        Run noOut = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", trace.toString(), "--out", "");
        assertThat(noOut.status()).isEqualTo(2);
        assertThat(noOut.err()).isEqualTo("error: --out: empty; give a file for the decisions, or - for standard output\n");
        Run directory = simulate("", "--algorithm", "gcra", "--limit", "1/1s", "--trace", dir.toString());
        assertThat(directory.err()).isEqualTo("error: " + dir + ": a directory, not a trace\n");
    }
}
