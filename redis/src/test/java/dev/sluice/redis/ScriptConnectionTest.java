package dev.sluice.redis;

import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisConnectionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The store's own connection for script calls, against a real redis-server. */
class ScriptConnectionTest {
    private static final String ECHO = "return ARGV[1] .. ':' .. KEYS[1]";
    /** Answers 'late' after 300 ms of Redis's time: a call that stays in line that long. */
    private static final String SLOW = "local t = redis.call('TIME') while true do local n = redis.call('TIME')"
            + " if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 300000 then break end end return 'late'";
    private static final long WRITE_TIMEOUT = TimeUnit.SECONDS.toNanos(10);
    private static RedisServer redis;
    private static DeadlineTimer timer;

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
        timer = new DeadlineTimer("test-write-watch");
    }

    @AfterAll
    static void stop() throws Exception {
        timer.stop();
        redis.close();
    }

    private static ScriptConnection connect(RedisServer server, AtomicInteger reloads) {
        return new ScriptConnection(address(server, null), 2_000, WRITE_TIMEOUT, timer, reloads::incrementAndGet);
    }

    private static ScriptConnection.Address address(RedisServer server, String clientName) {
        return new ScriptConnection.Address("127.0.0.1", server.port(), null, null, 0, clientName, null, null);
    }

    private static String sha(String text) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8)));
    }

    private static String echo(ScriptConnection connection, String key, String argument) throws Exception {
        return connection.evaluate(sha(ECHO), ECHO, new String[] {key}, new String[] {argument}).get(10, TimeUnit.SECONDS);
    }

    /** Keys and arguments go as UTF-8; the answer comes back one char per byte, so a binary answer arrives whole. */
    @Test
    void callsTheScriptAndReadsItsAnswerByteForByte() throws Exception {
        AtomicInteger reloads = new AtomicInteger();
        try (ScriptConnection connection = connect(redis, reloads)) {
            assertThat(echo(connection, "sluice:{a}", "x")).isEqualTo("x:sluice:{a}");
            String utf8 = new String("é€".getBytes(StandardCharsets.UTF_8), StandardCharsets.ISO_8859_1);
            assertThat(echo(connection, "k", "é€")).isEqualTo(utf8 + ":k");
            String binary = "return string.char(0, 1, 127, 128, 200, 255)";
            assertThat(connection.evaluate(sha(binary), binary, new String[0], new String[0]).get(10, TimeUnit.SECONDS))
                    .isEqualTo("\u0000\u0001\u007f\u0080\u00c8\u00ff");
        }
    }

    /** Redis without the script (restarted, flushed) runs it from its text once, and knows it after. */
    @Test
    void aScriptRedisDoesNotKnowIsSentWithItsTextOnce() throws Exception {
        AtomicInteger reloads = new AtomicInteger();
        try (ScriptConnection connection = connect(redis, reloads); Resp resp = redis.connect()) {
            resp.call("SCRIPT", "FLUSH");
            assertThat(echo(connection, "k", "1")).isEqualTo("1:k");
            assertThat(reloads).hasValue(1);
            assertThat(echo(connection, "k", "2")).isEqualTo("2:k");
            assertThat(reloads).as("known after").hasValue(1);
        }
    }

    /** An error in the script fails its call alone; the connection goes on. */
    @Test
    void anErrorAnswerFailsItsCallOnly() throws Exception {
        String failing = "return redis.error_reply('BOOM at ' .. KEYS[1])";
        try (ScriptConnection connection = connect(redis, new AtomicInteger())) {
            CompletableFuture<String> failed = connection.evaluate(sha(failing), failing, new String[] {"k"}, new String[0]);
            assertThatThrownBy(() -> failed.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(RedisCommandExecutionException.class).hasMessageContaining("BOOM at k");
            assertThat(echo(connection, "k", "after")).isEqualTo("after:k");
        }
    }

    /** Calls from many threads at once each get their own answer: answers are matched to calls in order. */
    @Test
    void callsFromManyThreadsGetTheirOwnAnswers() throws Exception {
        try (ScriptConnection connection = connect(redis, new AtomicInteger())) {
            String sha = sha(ECHO);
            List<Thread> threads = new ArrayList<>();
            AtomicReference<Throwable> wrong = new AtomicReference<>();
            for (int t = 0; t < 8; t++) {
                int thread = t;
                threads.add(new Thread(() -> {
                    List<CompletableFuture<String>> answers = new ArrayList<>();
                    for (int i = 0; i < 2_000; i++) {
                        answers.add(connection.evaluate(sha, ECHO, new String[] {"t" + thread}, new String[] {"" + i}));
                    }
                    for (int i = 0; i < answers.size(); i++) {
                        try {
                            String answer = answers.get(i).get(10, TimeUnit.SECONDS);
                            if (!answer.equals(i + ":t" + thread)) {
                                wrong.compareAndSet(null, new AssertionError("call " + i + " of thread " + thread
                                        + " got " + answer));
                            }
                        } catch (Exception e) {
                            wrong.compareAndSet(null, e);
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread thread : threads) {
                thread.join(60_000);
            }
            assertThat(wrong.get()).isNull();
        }
    }

    /**
     * Redis killed: the call in line fails, calls while it is down fail at once (no call waits for a Redis that is
     * not there), and once it is back the connection is made again without anyone asking.
     */
    @Test
    void aLostConnectionFailsItsCallsAndIsMadeAgainWhenRedisReturns() throws Exception {
        try (RedisServer own = RedisServer.start(); ScriptConnection connection = connect(own, new AtomicInteger())) {
            assertThat(echo(connection, "k", "before")).isEqualTo("before:k");
            CompletableFuture<String> inLine = connection.evaluate(sha(SLOW), SLOW, new String[0], new String[0]);
            own.kill();
            assertThatThrownBy(() -> inLine.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(RedisConnectionException.class);
            long start = System.nanoTime();
            CompletableFuture<String> whileDown = connection.evaluate(sha(ECHO), ECHO, new String[] {"k"},
                    new String[] {"down"});
            assertThatThrownBy(() -> whileDown.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(RedisConnectionException.class).hasMessageContaining("127.0.0.1:" + own.port());
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).as("failed at once").isLessThan(1_000);
            own.restart();
            assertThat(eventually(connection, "back")).isEqualTo("back:k");
        }
    }

    /** A password and a database in the address: the connection introduces itself, and its keys land in that database. */
    @Test
    void introducesItselfWithThePasswordAndDatabaseOfTheAddress() throws Exception {
        try (RedisServer guarded = RedisServer.start()) {
            try (Resp resp = guarded.connect()) {
                resp.call("CONFIG", "SET", "requirepass", "s3cret"); // the fixture waits for an open PING first
            }
            String set = "redis.call('SET', KEYS[1], 'here') return 'ok'";
            try (ScriptConnection connection = new ScriptConnection(
                    new ScriptConnection.Address("127.0.0.1", guarded.port(), null, "s3cret", 3, null, null, null), 2_000,
                    WRITE_TIMEOUT, timer, () -> { })) {
                assertThat(connection.evaluate(sha(set), set, new String[] {"placed"}, new String[0])
                        .get(10, TimeUnit.SECONDS)).isEqualTo("ok");
            }
            try (Resp resp = guarded.connect()) {
                resp.call("AUTH", "s3cret");
                resp.call("SELECT", "3");
                assertThat(resp.call("GET", "placed")).isEqualTo("here");
                resp.call("SELECT", "0");
                assertThat(resp.call("GET", "placed")).isNull();
            }
            assertThatThrownBy(() -> new ScriptConnection(
                    new ScriptConnection.Address("127.0.0.1", guarded.port(), null, "wrong", 0, null, null, null), 2_000,
                    WRITE_TIMEOUT, timer, () -> { }))
                    .isInstanceOf(RedisConnectionException.class)
                    .hasMessageContaining("127.0.0.1:" + guarded.port()).hasMessageContaining("AUTH refused")
                    .hasMessageNotContaining("wrong");
        }
    }

    /**
     * A command that is not a script (the store's reset, {@code DEL}): its answer as text, a string or an integer;
     * an error answer fails it, and is not taken for a script Redis does not know, even when it reads NOSCRIPT.
     */
    @Test
    void sendsCommandsThatAreNotScripts() throws Exception {
        AtomicInteger reloads = new AtomicInteger();
        try (ScriptConnection connection = connect(redis, reloads); Resp resp = redis.connect()) {
            assertThat(connection.command("SET", "plain:é", "v").get(10, TimeUnit.SECONDS)).isEqualTo("OK");
            assertThat(resp.call("GET", "plain:é")).isEqualTo("v");
            assertThat(connection.command("DEL", "plain:é").get(10, TimeUnit.SECONDS)).isEqualTo("1");
            assertThat(connection.command("DEL", "plain:é").get(10, TimeUnit.SECONDS)).isEqualTo("0");
            assertThat(connection.command("GET", "plain:é").get(10, TimeUnit.SECONDS)).isNull();
            assertThatThrownBy(() -> connection.command("NOSUCHCOMMAND").get(10, TimeUnit.SECONDS))
                    .isInstanceOf(ExecutionException.class).cause()
                    .isInstanceOf(RedisCommandExecutionException.class).hasMessageContaining("NOSUCHCOMMAND");
            assertThatThrownBy(() -> connection.command("EVALSHA", "0".repeat(40), "0").get(10, TimeUnit.SECONDS))
                    .as("a NOSCRIPT answered to a command of the caller's own: not a script to send again")
                    .isInstanceOf(ExecutionException.class).cause()
                    .isInstanceOf(RedisCommandExecutionException.class).hasMessageStartingWith("NOSCRIPT");
            assertThatThrownBy(() -> connection.command("TIME").get(10, TimeUnit.SECONDS)).as("an array")
                    .isInstanceOf(ExecutionException.class).cause()
                    .isInstanceOf(RedisCommandExecutionException.class)
                    .hasMessageStartingWith("expected a string from TIME, got [");
            assertThat(reloads).hasValue(0);
            assertThat(echo(connection, "k", "after")).as("the line still in step").isEqualTo("after:k");
        }
    }

    /** {@code ?clientName=} in the address: each connection, made again too, names itself so in CLIENT LIST. */
    @Test
    void namesItselfAsTheAddressSays() throws Exception {
        try (RedisServer own = RedisServer.start();
             ScriptConnection connection = new ScriptConnection(address(own, "sluice-test"), 2_000, WRITE_TIMEOUT,
                     timer, () -> { })) {
            assertThat(echo(connection, "k", "named")).isEqualTo("named:k");
            try (Resp resp = own.connect()) {
                assertThat(String.valueOf(resp.call("CLIENT", "LIST"))).contains("name=sluice-test ");
                resp.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
            }
            assertThat(eventually(connection, "again")).isEqualTo("again:k");
            try (Resp resp = own.connect()) {
                assertThat(String.valueOf(resp.call("CLIENT", "LIST"))).contains("name=sluice-test ");
            }
        }
    }

    /**
     * A bug of the first version: a Redis that stops reading (here DEBUG SLEEP) while calls keep coming fills its
     * buffers and the socket's, and then a write blocks, under the connection's lock, and every caller of the
     * connection with it, for as long as Redis sleeps: past any timeout. Now a write blocked for the write timeout
     * ends the connection: its calls fail as on a lost connection, the callers go on, and once Redis reads again
     * the connection is made again.
     */
    @Test
    void aWriteBlockedPastTheWriteTimeoutEndsTheConnection() throws Exception {
        try (RedisServer own = RedisServer.start();
             ScriptConnection connection = new ScriptConnection(address(own, null), 2_000,
                     TimeUnit.MILLISECONDS.toNanos(200), timer, () -> { })) {
            assertThat(echo(connection, "k", "warm")).isEqualTo("warm:k");
            CompletableFuture<Object> sleeping = own.sleep("4");
            RedisFailureTest.awaitHanging(own);
            String megabyte = "x".repeat(1 << 20);
            List<CompletableFuture<String>> calls = new ArrayList<>();
            long start = System.nanoTime();
            for (int i = 0; i < 64; i++) { // more than the buffers of both ends hold
                calls.add(connection.evaluate(sha(ECHO), ECHO, new String[] {"k"}, new String[] {megabyte}));
            }
            assertThat(System.nanoTime() - start).as("64 calls of a megabyte sent (or failed) while Redis sleeps 4 s")
                    .isLessThan(TimeUnit.SECONDS.toNanos(2));
            List<String> failures = new ArrayList<>();
            for (CompletableFuture<String> call : calls) {
                assertThatThrownBy(() -> call.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                        .hasCauseInstanceOf(RedisConnectionException.class)
                        .satisfies(failure -> failures.add(failure.getCause().getMessage()));
            }
            assertThat(failures).as("the calls in line say why").anyMatch(message -> message.matches(
                    "connection to 127\\.0\\.0\\.1:\\d+ lost: a write blocked for \\d+ ms \\(Redis is not reading\\)"));
            assertThat(sleeping.get(10, TimeUnit.SECONDS)).isEqualTo("OK");
            assertThat(eventually(connection, "awake")).isEqualTo("awake:k");
        }
    }

    /**
     * The reading thread takes a handed call only while it has nothing to read: then it runs it; while a call is
     * in line it refuses, and the caller sends.
     */
    @Test
    void theReadingThreadRunsHandedCallsOnlyWhileIdle() throws Exception {
        try (ScriptConnection connection = connect(redis, new AtomicInteger())) {
            assertThat(echo(connection, "k", "warm")).isEqualTo("warm:k");
            CompletableFuture<String> inLine = connection.evaluate(sha(SLOW), SLOW, new String[0], new String[0]);
            assertThatThrownBy(() -> connection.execute(() -> { }))
                    .isInstanceOf(RejectedExecutionException.class);
            assertThat(inLine.get(10, TimeUnit.SECONDS)).isEqualTo("late");
            AtomicReference<String> ranOn = new AtomicReference<>();
            CountDownLatch ran = new CountDownLatch(1);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (ran.getCount() > 0 && System.nanoTime() < deadline) {
                try {
                    connection.execute(() -> {
                        ranOn.set(Thread.currentThread().getName());
                        ran.countDown();
                    });
                    assertThat(ran.await(10, TimeUnit.SECONDS)).isTrue();
                } catch (RejectedExecutionException stillReading) {
                    Thread.sleep(1); // the thread has not parked yet after the answer
                }
            }
            assertThat(ranOn.get()).isEqualTo("sluice-redis-127.0.0.1:" + redis.port());
        }
    }

    /** The connections {@code resp}'s Redis has accepted since it started ({@code INFO stats}). */
    private static long connectionsReceived(Resp resp) throws java.io.IOException {
        String stats = String.valueOf(resp.call("INFO", "stats"));
        java.util.regex.Matcher received = java.util.regex.Pattern.compile("total_connections_received:(\\d+)")
                .matcher(stats);
        assertThat(received.find()).as("INFO stats: %s", stats).isTrue();
        return Long.parseLong(received.group(1));
    }

    /**
     * A bug a review found: Redis closing an idle connection (its {@code timeout}, {@code CLIENT KILL}) went
     * unnoticed until the next call failed on it. An idle connection is looked at every second and made again.
     */
    @Test
    void aConnectionRedisClosesWhileIdleIsMadeAgainBeforeTheNextCall() throws Exception {
        try (ScriptConnection connection = connect(redis, new AtomicInteger()); Resp resp = redis.connect()) {
            assertThat(echo(connection, "k", "before")).isEqualTo("before:k");
            long before = connectionsReceived(resp);
            long killed = (Long) resp.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
            assertThat(killed).isPositive();
            // the look (a second) and the connection made again, waited for rather than slept for (2.5 s stood for it)
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (connectionsReceived(resp) == before) {
                assertThat(System.nanoTime()).as("connected again within 10 s, no call made").isLessThan(deadline);
                Thread.sleep(20);
            }
            assertThat(echo(connection, "k", "after")).isEqualTo("after:k");
        }
    }

    /**
     * Redis's {@code timeout} never closes a connection of Sluice's: an idle one sends a PING a second. Before, Redis
     * closed it after {@code timeout} seconds, and the calls written before the next look failed on it (decided by
     * the failure policy, fail-open admitting them unlimited).
     */
    @Test
    void redisTimeoutNeverClosesAnIdleConnection() throws Exception {
        try (RedisServer own = RedisServer.start(); ScriptConnection connection = connect(own, new AtomicInteger())) {
            try (Resp resp = own.connect()) {
                resp.call("CONFIG", "SET", "timeout", "2");
            }
            assertThat(echo(connection, "k", "before")).isEqualTo("before:k");
            long connections = connectionsReceived(own);
            Thread.sleep(6_500); // three of Redis's timeouts, idle
            assertThat(echo(connection, "k", "after")).isEqualTo("after:k");
            assertThat(connectionsReceived(own)).as("never closed, so never made again: only the look's own connection")
                    .isEqualTo(connections + 1);
        }
    }

    /** Redis's count of the connections it accepted, this look's own among them. */
    private static long connectionsReceived(RedisServer server) throws Exception {
        try (Resp resp = server.connect()) {
            return ((String) resp.call("INFO", "stats")).lines()
                    .filter(line -> line.startsWith("total_connections_received:"))
                    .mapToLong(line -> Long.parseLong(line.substring(line.indexOf(':') + 1).trim())).findFirst()
                    .orElseThrow();
        }
    }

    /**
     * Redis killed while the connection is idle: the calls right after fail, none waits, and the connection is
     * made again once Redis is back (the first call may meet the dead socket on its write or on its read).
     */
    @Test
    void callsRightAfterRedisDiedWhileIdleFailAtOnceAndTheConnectionComesBack() throws Exception {
        try (RedisServer own = RedisServer.start(); ScriptConnection connection = connect(own, new AtomicInteger())) {
            assertThat(echo(connection, "k", "before")).isEqualTo("before:k");
            own.kill();
            for (int i = 0; i < 5; i++) {
                CompletableFuture<String> call = connection.evaluate(sha(ECHO), ECHO, new String[] {"k"},
                        new String[] {"" + i});
                assertThatThrownBy(() -> call.get(5, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                        .hasCauseInstanceOf(RedisConnectionException.class);
            }
            own.restart();
            assertThat(eventually(connection, "back")).isEqualTo("back:k");
        }
    }

    /** A server that accepts and then refuses (here: too many clients) is not taken for connected. */
    @Test
    void aServerThatAcceptsAndThenRefusesIsNotConnected() throws Exception {
        try (RedisServer full = RedisServer.start(); Resp resp = full.connect()) {
            resp.call("CONFIG", "SET", "maxclients", "1");
            assertThatThrownBy(() -> connect(full, new AtomicInteger()))
                    .isInstanceOf(RedisConnectionException.class)
                    .hasMessageContaining("127.0.0.1:" + full.port()).hasMessageContaining("max number of clients");
        }
    }

    /**
     * A caller's continuation runs on the reading thread; one that interrupts it must not leave it spinning
     * (an interrupt left set makes every park return at once) nor stop the connection.
     */
    @Test
    void aStrayInterruptOnTheReadingThreadNeitherSpinsItNorStopsIt() throws Exception {
        try (ScriptConnection connection = connect(redis, new AtomicInteger())) {
            AtomicReference<String> ranOn = new AtomicReference<>();
            connection.evaluate(sha(SLOW), SLOW, new String[0], new String[0]) // registered long before its answer
                    .thenRun(() -> {
                        ranOn.set(Thread.currentThread().getName());
                        Thread.currentThread().interrupt();
                    }).get(10, TimeUnit.SECONDS);
            assertThat(ranOn.get()).isEqualTo(connection.reader().getName());
            Thread.sleep(200); // the thread parks again, idle
            java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
            long before = threads.getThreadCpuTime(connection.reader().getId());
            Thread.sleep(1_000);
            long spent = threads.getThreadCpuTime(connection.reader().getId()) - before;
            assertThat(TimeUnit.NANOSECONDS.toMillis(spent)).as("CPU the idle reading thread spent in a second")
                    .isLessThan(200);
            assertThat(echo(connection, "k", "still")).isEqualTo("still:k");
        }
    }

    /** Closing fails what is in line and every later call, naming the connection. */
    @Test
    void closingFailsWhatIsInLineAndEveryLaterCall() throws Exception {
        ScriptConnection connection = connect(redis, new AtomicInteger());
        CompletableFuture<String> inLine = connection.evaluate(sha(SLOW), SLOW, new String[0], new String[0]);
        connection.close();
        assertThatThrownBy(() -> inLine.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(RedisConnectionException.class);
        assertThatThrownBy(() -> echo(connection, "k", "after")).isInstanceOf(ExecutionException.class)
                .hasMessageContaining("closed");
        assertThatThrownBy(() -> connection.execute(() -> { })).isInstanceOf(RejectedExecutionException.class);
        connection.reader().join(10_000);
        assertThat(connection.reader().isAlive()).as("the reading thread ended").isFalse();
    }

    /** Calls {@link #ECHO} until Redis answers (10 s at most), as after a restart. */
    private static String eventually(ScriptConnection connection, String argument) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                return echo(connection, "k", argument);
            } catch (ExecutionException e) {
                assertThat(e).hasCauseInstanceOf(RedisConnectionException.class);
                assertThat(System.nanoTime()).as("answered within 10 s").isLessThan(deadline);
                Thread.sleep(20);
            }
        }
    }
}
