package dev.sluice.cli;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.ManualClock;
import dev.sluice.Mode;
import dev.sluice.RateLimiter;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.redis.RedisStore;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.config.TerminalText;
import dev.sluice.server.config.TextFile;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import dev.sluice.store.StoreUnavailableException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedInputStream;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;

/**
 * {@code sluice simulate}: replays a trace through the real limiter on a manual clock (docs/simulate.md).
 * The options are checked first, the trace as it is replayed; a bad value stops the run with one {@code error:}
 * line and exit status 2, and no decision is written: they are held in a file of their own until the trace's last
 * line, then copied out.
 */
@Command(name = "simulate", sortOptions = false, mixinStandardHelpOptions = true, version = Sluice.VERSION,
        description = "Replay a trace of requests through a limiter and print every decision.")
final class SimulateCommand implements Callable<Integer> {
    private static final String STDIO = "-";
    private static final int KEYS_IN_SUMMARY = 20;

    @Option(names = "--algorithm", required = true, paramLabel = "ALG",
            description = "fixed-window, sliding-log, sliding-window, token-bucket, gcra or leaky-bucket")
    String algorithm;

    @Option(names = "--limit", required = true, paramLabel = "L/P",
            description = "a limit such as 600/1m; repeat to stack several limits on each key")
    List<String> limits = new ArrayList<>();

    @Option(names = "--burst", paramLabel = "B", description = "the capacity (token-bucket, gcra, leaky-bucket)")
    String burst;

    @Option(names = "--refill", paramLabel = "greedy|interval", description = "token-bucket refill (default greedy)")
    String refill;

    @Option(names = "--mode", paramLabel = "reject|delay|shaping", description = "default reject")
    String mode = "reject";

    @Option(names = "--max-delay", paramLabel = "DURATION", description = "with --mode delay, how long a request may"
            + " wait; with shaping, the longest turn in the queue a request is let in for; such as 2s")
    String maxDelay;

    @Option(names = "--store", paramLabel = "STORE",
            description = "memory (the default), redis://HOST:PORT or redis-cluster://HOST:PORT,HOST:PORT")
    String store = ServerConfig.MEMORY;

    /**
     * The Redis password from an environment variable, as sluice.yaml's {@code store_password_env}: one written into
     * {@code --store} is on the command line, which every user of the machine can read ({@code ps}; a review found no
     * other way to give one).
     */
    @Option(names = "--store-password-env", paramLabel = "NAME",
            description = "the environment variable that holds the Redis store's password, kept off the command line")
    String storePasswordEnv;

    @Option(names = "--trace", required = true, paramLabel = "FILE|-", description = "the trace, CSV t_ms,key[,cost]")
    String trace;

    @Option(names = "--out", paramLabel = "FILE|-", description = "where the decisions go (default -)")
    String out = STDIO;

    private final InputStream stdin;
    private final OutputStream stdout;
    private final PrintWriter err;

    SimulateCommand(InputStream stdin, OutputStream stdout, PrintWriter err) {
        this.stdin = stdin;
        this.stdout = stdout;
        this.err = err;
    }

    @Override
    public Integer call() throws BadInput, IOException {
        Rule rule = rule();
        checkOutput();
        checkStore(rule);
        InputStream in = openTrace();
        ManualClock clock = new ManualClock();
        // the command answers for Redis in its one error line: Lettuce's own warnings (a Cluster's nodes refusing,
        // four lines before it) would only repeat it (a review found them)
        java.util.logging.Level lettuceLevel = LETTUCE_LOG.getLevel();
        LETTUCE_LOG.setLevel(java.util.logging.Level.OFF);
        try {
            // its header is read before any store is opened
            return run(rule, TraceFile.open(trace.equals(STDIO) ? "<stdin>" : trace, in), clock);
        } finally {
            LETTUCE_LOG.setLevel(lettuceLevel);
            if (!trace.equals(STDIO)) {
                in.close();
            }
        }
    }

    /** Held, so that the level set on it stays: java.util.logging keeps its loggers weakly. */
    private static final java.util.logging.Logger LETTUCE_LOG = java.util.logging.Logger.getLogger("io.lettuce");

    /**
     * How long a run asked to stop ({@code SIGINT}, {@code SIGTERM}) may take to clean up: its held decisions removed,
     * its keys on Redis reset. A review found both left behind by a Ctrl-C: 13 MB in the temporary directory, and
     * 3,486 keys on Redis for 52 days.
     */
    static final long STOP_GRACE_MS = 5_000;

    private Integer run(Rule rule, TraceFile requests, ManualClock clock) throws BadInput {
        Path held = heldDecisions();
        try (StopSignal stop = StopSignal.watch(STOP_GRACE_MS, () -> deleteQuietly(held))) {
            return run(rule, requests, clock, held, stop);
        } finally {
            deleteQuietly(held);
        }
    }

    /** A run asked to stop: said, and nothing written; the process is ending ({@code 130}, as after a Ctrl-C). */
    private int stopped(String where) {
        err.println("error: stopped " + where + "; nothing written");
        err.flush();
        return 130;
    }

    private static void deleteQuietly(Path held) {
        try {
            Files.deleteIfExists(held);
        } catch (IOException e) {
            // in the temporary directory, whose own clean-up takes it
        }
    }

    private Integer run(Rule rule, TraceFile requests, ManualClock clock, Path held, StopSignal stop)
            throws BadInput {
        Store chosen = store();
        // on a shared Redis, this run's keys are its own, and are removed at the end
        String namespace = chosen instanceof RedisStore ? "simulate-" + UUID.randomUUID() + ":" : "";
        RateLimiter limiter = RateLimiter.builder().rule(rule).store(chosen).clock(clock).build();
        Map<String, long[]> tally = new LinkedHashMap<>();
        // every line is held back until the last is made: a bad line or a store that fails mid-run leaves no output
        try (Writer decisions = Files.newBufferedWriter(held, StandardCharsets.UTF_8)) {
            decisions.write("t_ms,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms\n");
            StringBuilder line = new StringBuilder(128);
            for (TraceRequest request = requests.next(); request != null; request = requests.next()) {
                if (stop.asked()) {
                    return stopped("at line " + requests.lineNumber() + " of the trace");
                }
                clock.set(request.millis() * 1_000_000L);
                Decision decision = limiter.tryAcquire(namespace + request.key(), request.cost());
                line.setLength(0);
                line.append(request.millis()).append(',').append(Csv.quote(request.key())).append(',')
                        .append(request.cost()).append(',').append(decision.allowed()).append(',')
                        .append(decision.remaining()).append(',')
                        .append(DurationFormat.toMillisCeil(decision.retryAfterNanos())).append(',')
                        .append(DurationFormat.toMillisCeil(decision.resetAfterNanos())).append(',')
                        .append(DurationFormat.toMillisCeil(decision.delayNanos())).append('\n');
                decisions.append(line);
                // a peek (cost 0) apart, as the server counts it: it admits nothing (a review found it counted admitted)
                tally.computeIfAbsent(request.key(), k -> new long[3])[request.cost() == 0 ? 2 : decision.allowed() ? 0 : 1]++;
            }
            if (stop.asked()) { // a trace piped from a program stopped with it (Ctrl-C) ends early: not its end
                return stopped("at the trace's end");
            }
        } catch (StoreUnavailableException e) {
            err.println("error: --store " + TerminalText.of(RedisStore.shown(store) + ": " + e.getMessage()));
            err.flush();
            return 1;
        } catch (IOException e) {
            throw new BadInput(held + ": cannot hold the decisions until the trace's end: " + TextFile.reason(e)
                    + " (another directory: SLUICE_JAVA_OPTS=-Djava.io.tmpdir=DIR)");
        } finally {
            if (chosen instanceof RedisStore) {
                // past a key that cannot be reset (its Cluster node down): the others still are (a review found
                // those on the masters alive left), for as long as the failures take at most STOP_GRACE_MS
                long firstFailure = 0;
                for (String key : tally.keySet()) {
                    try {
                        limiter.reset(namespace + key);
                    } catch (RuntimeException e) { // this one expires by itself, an hour after its reset_after
                        long now = System.nanoTime();
                        if (firstFailure == 0) {
                            firstFailure = now;
                        } else if (now - firstFailure > STOP_GRACE_MS * 1_000_000) {
                            break;
                        }
                    }
                }
                closeQuietly((RedisStore) chosen);
            }
        }
        String written = out.equals(STDIO) ? "standard output" : out;
        try (Writer writer = output(); java.io.Reader decisions = Files.newBufferedReader(held, StandardCharsets.UTF_8)) {
            decisions.transferTo(writer);
        } catch (IOException e) {
            throw new BadInput(written + ": cannot write the decisions: " + TextFile.reason(e));
        }
        if (out.equals(STDIO) && stdout instanceof PrintStream printed && printed.checkError()) {
            // a PrintStream keeps its failures to itself: /dev/full, a closed pipe
            throw new BadInput(written + ": cannot write the decisions");
        }
        summarize(tally);
        return 0;
    }

    /**
     * Refuses, before anything is read or decided, an {@code --out} the decisions cannot be written to: empty (the
     * working directory: a past bug, "error: : cannot write" after the whole trace was decided), a directory, in a
     * directory that is not there or not writable (a review found these told only after the whole trace was
     * decided, on Redis too), or the trace itself: writing the decisions would destroy it.
     */
    private void checkOutput() throws BadInput {
        if (out.isEmpty()) {
            throw new BadInput("--out: empty; give a file for the decisions, or - for standard output");
        }
        if (out.equals(STDIO)) {
            return;
        }
        Path written = path("--out", out);
        if (Files.isDirectory(written)) {
            throw new BadInput("--out " + out + ": a directory; give a file for the decisions");
        }
        if (Files.exists(written)) {
            // a file there is written over: its own permission counts, not its directory's (/dev/null, /dev/stdout
            // are in a directory only root may write; a review found them refused)
            if (!Files.isWritable(written)) {
                throw new BadInput("--out " + out + ": not writable");
            }
        } else {
            Path directory = written.toAbsolutePath().getParent();
            if (directory != null && !Files.isDirectory(directory)) {
                throw new BadInput("--out " + out + ": no such directory " + directory);
            }
            if (directory != null && !Files.isWritable(directory)) {
                throw new BadInput("--out " + out + ": not writable (its directory " + directory + " is not)");
            }
        }
        if (trace.equals(STDIO) || trace.isEmpty() || !Files.exists(written)) {
            return;
        }
        try {
            if (Files.isSameFile(path("--trace", trace), written)) {
                throw new BadInput("--out " + out + ": the trace itself; the decisions would overwrite it");
            }
        } catch (IOException e) {
            // the trace cannot be read: reading it says so
        }
    }

    /**
     * {@code name} as a path, or a {@link BadInput} naming {@code option}: a name this JVM cannot hold (a NUL; a
     * letter past ASCII where the locale is not UTF-8, LANG unset or C, as under cron) was a stack trace (a review
     * found it).
     */
    private static Path path(String option, String name) throws BadInput {
        try {
            return Path.of(name);
        } catch (java.nio.file.InvalidPathException e) {
            throw new BadInput(option + " " + name.replace('\0', '?') + ": not a file name this system can use ("
                    + e.getReason() + "; file names are read as " + System.getProperty("sun.jnu.encoding")
                    + ", from the locale)");
        }
    }

    private static void closeQuietly(RedisStore store) {
        try {
            store.close();
        } catch (Exception e) {
            // a failing disconnect changes none of the decisions
        }
    }

    /** The rule the options describe, or the first thing wrong with them. */
    Rule rule() throws BadInput {
        Algorithm chosen = option("--algorithm", () -> Algorithm.parse(algorithm));
        Mode parsedMode = option("--mode", () -> Mode.parse(mode));
        // leaky-bucket's delay is its queue, shaping, as sluice.yaml reads mode: delay (a review found the file
        // taking what simulate refused)
        Mode chosenMode = parsedMode == Mode.DELAY ? chosen.delayMode() : parsedMode;
        if (burst != null && !chosen.hasBurst()) {
            throw new BadInput("--" + chosen.refusesBurst());
        }
        if (refill != null && !chosen.hasRefill()) {
            throw new BadInput("--" + chosen.refusesRefill());
        }
        if (chosenMode == Mode.DELAY && maxDelay == null) {
            throw new BadInput("--mode delay needs --max-delay");
        }
        if (chosenMode == Mode.REJECT && maxDelay != null) {
            throw new BadInput("--max-delay is for --mode delay (and leaky-bucket's shaping)");
        }
        Long chosenBurst = burst == null ? null : wholeNumber("--burst", burst);
        Refill chosenRefill = refill == null ? null : option("--refill", () -> Refill.parse(refill));
        List<Limit> parsed = new ArrayList<>();
        for (String text : limits) {
            // --burst and --refill apply to every limit; a limit may also carry its own (600/1m burst=900)
            Limit limit = option("--limit", () -> Limit.parse(text));
            for (String given : List.of("burst", "refill")) {
                if ((given.equals("burst") ? burst : refill) != null && Limit.givesOption(text, given)) {
                    throw new BadInput("--limit " + text + ": gives its own " + given + ", and --" + given
                            + " would replace it: give it in one place");
                }
            }
            Limit refilled = chosenRefill == null ? limit : limit.withRefill(chosenRefill);
            Limit chosenLimit = chosenBurst == null ? refilled : option("--burst", () -> refilled.withBurst(chosenBurst));
            if (parsed.contains(chosenLimit)) { // as sluice.yaml refuses it: a slip, most likely for another limit
                throw new BadInput("--limit " + text + ": given twice; the same limit twice decides as once");
            }
            // a limit's own problem (a burst its algorithm takes none of, too deep) named --limit, as sluice.yaml
            // tells it at the limit's line; what is left for the whole rule is the mode's
            option("--limit", () -> Rule.of(chosen, List.of(chosenLimit), Mode.REJECT, 0));
            parsed.add(chosenLimit);
        }
        long given = maxDelay == null ? 0 : option("--max-delay", () -> DurationFormat.parseNanos(maxDelay));
        if (chosenMode == Mode.SHAPING) { // a queue with no --max-delay: its length its only bound; 0 holds nothing
            long hold = maxDelay == null ? Rule.NO_MAX_DELAY : given;
            option("--mode shaping", () -> Rule.of(chosen, parsed, chosenMode, Rule.NO_MAX_DELAY));
            return option("--max-delay", () -> Rule.of(chosen, parsed, chosenMode, hold));
        }
        long delay = given;
        if (chosenMode != Mode.DELAY) {
            return option("--mode " + chosenMode.label(), () -> Rule.of(chosen, parsed, chosenMode, delay));
        }
        // the mode's own problem (an algorithm without delay) with a delay that can be none, then the delay's, named
        // --max-delay (a review found 0s and a delay spanning too many refills blamed on --mode delay)
        option("--mode delay", () -> Rule.of(chosen, parsed, Mode.DELAY, 1));
        return option("--max-delay", () -> Rule.of(chosen, parsed, Mode.DELAY, delay));
    }

    /** Refuses, before the trace is read, a store that is none, or one that cannot decide the rule exactly. */
    private void checkStore(Rule rule) throws BadInput {
        if (ServerConfig.inMemory(store)) {
            if (storePasswordEnv != null) {
                throw new BadInput("--store-password-env: the in-memory store takes no password; it is for --store"
                        + " redis://...");
            }
            return;
        }
        if (!store.startsWith("redis://") && !store.startsWith("redis-cluster://")) {
            throw new BadInput("--store: \"" + RedisStore.shown(store) + "\" is not a store: use memory, redis://HOST:PORT or "
                    + "redis-cluster://HOST:PORT,HOST:PORT");
        }
        if (storePasswordEnv != null) {
            String password = System.getenv(storePasswordEnv);
            if (password == null || password.isEmpty()) {
                throw new BadInput("--store-password-env " + storePasswordEnv + ": no such environment variable, or"
                        + " an empty one");
            }
            if (RedisStore.hasPassword(store)) {
                throw new BadInput("--store-password-env " + storePasswordEnv + ": the store's address has a password"
                        + " of its own (" + RedisStore.shown(store) + "); give it one way");
            }
        }
        option("--store " + RedisStore.shown(store), () -> {
            RedisStore.checkExact(rule);
            return rule;
        });
    }

    private Store store() throws BadInput {
        if (ServerConfig.inMemory(store)) {
            // every key of the trace is kept: a simulation is exact, not bounded
            return InMemoryStore.builder().maxKeys(Long.MAX_VALUE).build();
        }
        try {
            // every decision of a simulation must come from Redis: wait long, and fail loudly
            RedisStore.Builder builder = RedisStore.builder(store).timeout(Duration.ofSeconds(10)).raiseFailures(true);
            return (storePasswordEnv == null ? builder : builder.password(System.getenv(storePasswordEnv))).build();
        } catch (RuntimeException e) {
            throw new BadInput("--store " + RedisStore.shown(store) + ": cannot connect: "
                    + e.getMessage().replace(store, RedisStore.shown(store)));
        }
    }

    /**
     * Where {@link #heldDecisions} are made: the temporary directory, unless a test names its own (other simulations
     * running on the machine hold theirs in the temporary directory too).
     */
    static volatile Path heldIn;

    /** The file the decisions are held in until the trace's last line: in the temporary directory, made anew. */
    private static Path heldDecisions() throws BadInput {
        try {
            Path directory = heldIn;
            return directory == null ? Files.createTempFile("sluice-simulate-", ".csv")
                    : Files.createTempFile(directory, "sluice-simulate-", ".csv");
        } catch (IOException | UnsupportedOperationException e) {
            throw new BadInput("cannot make a file in " + System.getProperty("java.io.tmpdir") + " to hold the"
                    + " decisions until the trace's end: " + (e instanceof IOException io ? TextFile.reason(io) : e)
                    + " (another directory: SLUICE_JAVA_OPTS=-Djava.io.tmpdir=DIR)");
        }
    }

    /** The trace, buffered: standard input, or its file opened. */
    private InputStream openTrace() throws BadInput {
        if (trace.equals(STDIO)) {
            return new BufferedInputStream(stdin, 1 << 16);
        }
        if (trace.isEmpty()) {
            throw new BadInput("--trace: empty; give the trace's file, or - for standard input");
        }
        Path file = path("--trace", trace);
        if (Files.isDirectory(file)) {
            throw new BadInput(trace + ": a directory, not a trace");
        }
        try {
            return new BufferedInputStream(Files.newInputStream(file), 1 << 16);
        } catch (NoSuchFileException e) {
            throw new BadInput(trace + ": no such file");
        } catch (IOException e) {
            throw new BadInput(trace + ": cannot read: " + TextFile.reason(e));
        }
    }

    private Writer output() throws BadInput {
        if (out.equals(STDIO)) {
            return new BufferedWriter(new OutputStreamWriter(stdout, StandardCharsets.UTF_8), 1 << 16);
        }
        try {
            return Files.newBufferedWriter(path("--out", out), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new BadInput(out + ": cannot write: " + TextFile.reason(e));
        }
    }

    private void summarize(Map<String, long[]> tally) {
        long admitted = 0;
        long rejected = 0;
        long peeked = 0;
        int shown = 0;
        for (Map.Entry<String, long[]> entry : tally.entrySet()) {
            admitted += entry.getValue()[0];
            rejected += entry.getValue()[1];
            peeked += entry.getValue()[2];
            if (shown++ < KEYS_IN_SUMMARY) {
                err.printf("%s: %d admitted, %d rejected%s%n", TerminalText.of(entry.getKey()), entry.getValue()[0],
                        entry.getValue()[1], peeks(entry.getValue()[2]));
            }
        }
        if (tally.size() > KEYS_IN_SUMMARY) {
            err.printf("... and %d more keys%n", tally.size() - KEYS_IN_SUMMARY);
        }
        err.printf("total: %d admitted, %d rejected%s, %d key%s%n", admitted, rejected, peeks(peeked), tally.size(),
                tally.size() == 1 ? "" : "s");
        err.flush();
    }

    /** The peeks of a summary line, said only where there were any. */
    private static String peeks(long count) {
        return count == 0 ? "" : ", " + count + " peeked";
    }

    private static long wholeNumber(String name, String text) throws BadInput {
        String problem = name + ": must be a whole number >= 1, got \"" + text + "\"";
        if (text.isEmpty() || !text.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new BadInput(problem);
        }
        try {
            long value = Long.parseLong(text);
            if (value < 1) {
                throw new BadInput(problem);
            }
            return value;
        } catch (NumberFormatException tooLarge) {
            throw new BadInput(name + ": too large, got \"" + text + "\"");
        }
    }

    /** A value parsed for an option, or a {@link BadInput} that names the option. */
    private static <T> T option(String name, Parse<T> parse) throws BadInput {
        try {
            return parse.get();
        } catch (IllegalArgumentException e) {
            throw new BadInput(name + ": " + e.getMessage());
        }
    }

    @FunctionalInterface
    private interface Parse<T> {
        T get();
    }
}
