package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.RateLimiter;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** What is particular to Redis: its clock, its keys and their TTL, the script cache, the bounds of Lua. */
class RedisStoreTest {
    private static final long S = 1_000_000_000L;
    private final RedisServer redis = SharedRedis.server();
    private final RedisStore store = SharedRedis.store();

    /**
     * A TTL of 2^31 ms (24.8 days) or more, past what gcra.lua makes text with '%d' (a C long, 32 bits on some
     * builds of Redis): still the key's reset_after, to the millisecond, as a shorter one.
     */
    @Test
    void aKeyOfALongLimitLivesItsWholeResetAfter() throws IOException {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("2/40d").store(store).build();
        Decision first = limiter.tryAcquire("long-lived", 2);
        assertThat(first.resetAfterNanos()).isEqualTo(40L * 86_400 * S);
        try (Resp resp = redis.connect()) {
            long ttl = (Long) resp.call("PTTL", "sluice:{long-lived}");
            assertThat(ttl).as("40 days less the time since the decision").isGreaterThan(40L * 86_400_000 - 5_000)
                    .isLessThanOrEqualTo(40L * 86_400_000).isGreaterThan(1L << 31);
        }
    }

    @Test
    void decidesOnTheServersClockAndLetsTheKeyExpireWhenUntouched() throws IOException {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1m").store(store).build();
        Decision first = limiter.tryAcquire("clock-user", 3);
        assertThat(first.allowed()).isTrue();
        assertThat(first.remaining()).isEqualTo(7);
        assertThat(first.resetAfterNanos()).isEqualTo(18 * S);
        try (Resp resp = redis.connect()) {
            long ttl = (Long) resp.call("PTTL", "sluice:{clock-user}");
            assertThat(ttl).as("18 s less the time since the decision").isBetween(13_000L, 18_000L);
            // the key's clock is Redis's own TIME, in milliseconds and nanoseconds: the first two of the binary
            // state's doubles, after its tag 'g'
            assertThat((String) resp.call("GET", "sluice:{clock-user}")).startsWith("g");
            assertThat(resp.call("STRLEN", "sluice:{clock-user}")).isEqualTo(41L);
            long stateMillis = Long.parseLong((String) resp.call("EVAL",
                    "return string.format('%.0f', (struct.unpack('<d', redis.call('GET', KEYS[1]), 2)))", "1",
                    "sluice:{clock-user}"));
            List<?> time = (List<?>) resp.call("TIME");
            long serverMillis = Long.parseLong((String) time.get(0)) * 1000 + Long.parseLong((String) time.get(1)) / 1000;
            assertThat(serverMillis - stateMillis).isBetween(0L, 5_000L);
        }
    }

    /**
     * A key whose clock is ahead of the server's (here stamped by a decision at a time passed in, ten minutes
     * on; in production the server's clock stepping back, or a replica promoted behind its master) is decided at
     * its own clock, and expires when its state is untouched by that clock. A past bug: the expiry was counted
     * from the server's now, so the key went ten minutes early with its state, and extra requests got in.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"gcra", "sliding-log"})
    void aKeyWhoseClockIsAheadOfTheServersLivesUntilItIsUntouchedByItsOwnClock(String algorithm) throws IOException {
        Rule rule = Rule.of(Algorithm.parse(algorithm), List.of(Limit.parse("10/1s")));
        try (Resp resp = redis.connect()) {
            List<?> time = (List<?>) resp.call("TIME");
            long serverNanos = Long.parseLong((String) time.get(0)) * S + Long.parseLong((String) time.get(1)) * 1_000;
            String key = "ahead-" + algorithm;
            assertThat(store.decide(rule, key, 1, serverNanos + 600 * S).allowed()).isTrue();
            Decision onServerClock = store.decide(rule, key, 1, Store.STORE_CLOCK);
            assertThat(onServerClock.remaining()).as("decided at the key's clock").isEqualTo(8);
            long ttl = (Long) resp.call("PTTL", "sluice:{" + key + "}");
            assertThat(ttl).as("ten minutes ahead, plus its reset_after of %s", onServerClock.resetAfter())
                    .isGreaterThan(600_000L).isLessThanOrEqualTo(600_000L + onServerClock.resetAfterNanos() / 1_000_000 + 1);
        }
    }

    /**
     * A password given apart from the address ({@code password(...)}: from a secret), as it is, whatever characters
     * it holds, where the address's would need percent-encoding; given twice, refused.
     */
    @Test
    void aPasswordGivenApartFromTheAddress() throws Exception {
        String secret = "p@ss/w%rd #1:{x}";
        try (RedisServer guarded = RedisServer.start()) {
            try (Resp resp = guarded.connect()) {
                resp.call("CONFIG", "SET", "requirepass", secret); // the fixture waits for an open PING first
            }
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("10/1m")));
            try (RedisStore own = RedisStore.builder(guarded.uri() + "/2").password(secret).raiseFailures(true).build()) {
                assertThat(own.decide(rule, "k", 3, Store.STORE_CLOCK).remaining()).isEqualTo(7);
            }
            // with a user of its own, redis://user:@host: authenticated as that user, not as the default one (a review
            // found the user dropped, and the store connected as the default user with that user's password refused)
            try (Resp resp = guarded.connect()) {
                resp.call("AUTH", secret);
                resp.call("ACL", "SETUSER", "app", "on", ">app secret", "~sluice:*", "+@all");
            }
            try (RedisStore own = RedisStore.builder("redis://app:@127.0.0.1:" + guarded.port()).password("app secret")
                    .raiseFailures(true).build()) {
                assertThat(own.decide(rule, "k", 1, Store.STORE_CLOCK).remaining()).as("as app, database 0")
                        .isEqualTo(9);
                try (Resp resp = guarded.connect()) {
                    resp.call("AUTH", secret);
                    assertThat(String.valueOf(resp.call("CLIENT", "LIST"))).contains(" user=app ");
                }
            }
            assertThatThrownBy(() -> RedisStore.builder(guarded.uri()).password("wrong").build())
                    .hasMessageContaining("AUTH refused: WRONGPASS");
            assertThatThrownBy(() -> RedisStore.builder("redis://:other@127.0.0.1:" + guarded.port()).password(secret)
                    .build()).hasMessage("bad Redis address \"redis://:****@127.0.0.1:" + guarded.port() + "\": it has a"
                    + " password, and one is given apart from it; give it once");
            assertThatThrownBy(() -> RedisStore.builder(guarded.uri()).password(""))
                    .hasMessage("a password given apart from the address cannot be empty");
        }
    }

    /**
     * A password (with and without a user) and a database in the address: both scripts' decisions, and a reset,
     * land in that database.
     */
    @Test
    void decidesInTheDatabaseOfTheAddressWithItsPassword() throws Exception {
        try (RedisServer guarded = RedisServer.start()) {
            try (Resp resp = guarded.connect()) {
                resp.call("CONFIG", "SET", "requirepass", "s3cret"); // the fixture waits for an open PING first
            }
            for (String uri : List.of("redis://:s3cret@127.0.0.1:" + guarded.port() + "/3",
                    "redis://default:s3cret@127.0.0.1:" + guarded.port() + "/4")) {
                String database = uri.substring(uri.lastIndexOf('/') + 1);
                try (RedisStore own = RedisStore.builder(uri).timeout(Duration.ofSeconds(2)).build()) {
                    RateLimiter gcra = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1m").store(own).build();
                    RateLimiter window = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("10/1m")
                            .store(own).build();
                    assertThat(gcra.tryAcquire("g-" + database, 3).remaining()).isEqualTo(7);
                    assertThat(window.tryAcquire("w-" + database, 4).remaining()).isEqualTo(6);
                    assertThat(window.tryAcquire("gone-" + database, 4).remaining()).isEqualTo(6);
                    window.reset("gone-" + database);
                    assertThat(window.tryAcquire("gone-" + database, 1).remaining()).as("reset").isEqualTo(9);
                    window.reset("gone-" + database);
                    assertThat(own.counts().failures()).isZero();
                }
                try (Resp resp = guarded.connect()) {
                    resp.call("AUTH", "s3cret");
                    resp.call("SELECT", database);
                    assertThat(resp.call("EXISTS", "sluice:{g-" + database + "}", "sluice:{w-" + database + "}"))
                            .isEqualTo(2L);
                    assertThat(resp.call("EXISTS", "sluice:{gone-" + database + "}")).isEqualTo(0L);
                    resp.call("SELECT", "0");
                    assertThat(resp.call("EXISTS", "sluice:{g-" + database + "}", "sluice:{w-" + database + "}"))
                            .isEqualTo(0L);
                }
            }
        }
    }

    /**
     * A standalone store opens its own connections only, one per core and at least two, and the waiting lane
     * (the store's {@code lane} says why), each named as the
     * address's {@code ?clientName=} says; no Lettuce connection beside them (there was one each, for resets),
     * and no Lettuce thread. The resets go on the same connections.
     */
    @Test
    void aStandaloneStoreOpensOnlyItsOwnConnections() throws Exception {
        try (RedisServer own = RedisServer.start(); Resp resp = own.connect()) {
            int before = clients(resp).size();
            Set<Thread> threads = Thread.getAllStackTraces().keySet();
            try (RedisStore store = RedisStore.builder("redis://127.0.0.1:" + own.port() + "?clientName=sluice-own")
                    .timeout(Duration.ofSeconds(2)).build()) {
                RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("10/1m")
                        .store(store).build();
                assertThat(limiter.tryAcquire("k", 4).remaining()).isEqualTo(6);
                limiter.reset("k");
                assertThat(limiter.tryAcquire("k").remaining()).isEqualTo(9);
                int expected = Math.max(2, Runtime.getRuntime().availableProcessors()) + 1;
                List<String> opened = clients(resp);
                assertThat(opened).hasSize(before + expected);
                assertThat(opened.stream().filter(client -> client.contains(" name=sluice-own "))).hasSize(expected);
                assertThat(Thread.getAllStackTraces().keySet().stream().filter(thread -> !threads.contains(thread))
                        .map(Thread::getName).filter(name -> name.startsWith("lettuce-"))).as("Lettuce threads started")
                        .isEmpty();
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (clients(resp).size() != before) { // Redis frees a closed client in a later turn of its loop
                assertThat(System.nanoTime()).as("every connection closed within 10 s").isLessThan(deadline);
                Thread.sleep(10);
            }
        }
    }

    /** The connections a standalone store makes can be chosen, within bounds that name the value refused. */
    @Test
    void aStandaloneStoreMakesTheConnectionsItIsToldTo() throws Exception {
        try (RedisServer own = RedisServer.start(); Resp resp = own.connect()) {
            int before = clients(resp).size();
            try (RedisStore store = RedisStore.builder("redis://127.0.0.1:" + own.port()).connections(5)
                    .timeout(Duration.ofSeconds(2)).build()) {
                assertThat(store.connections()).hasSize(5);
                assertThat(clients(resp)).as("and the waiting lane").hasSize(before + 6);
                RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1m").store(store).build();
                assertThat(limiter.tryAcquire("k", 4).remaining()).isEqualTo(6);
            }
        }
        for (int refused : new int[] {1, 0, -3, 257}) {
            assertThatThrownBy(() -> RedisStore.builder("redis://127.0.0.1:1").connections(refused))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("a store makes 2 to 256 connections to Redis, got " + refused);
        }
    }

    /** Runs {@code task} on {@code connection}'s reading thread, as a caller's continuation runs. */
    private static void runOnItsReadingThread(ScriptConnection connection, Runnable task) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) { // handed to the reading thread, which takes it only while idle
            try {
                connection.execute(task);
                return;
            } catch (RejectedExecutionException busy) {
                assertThat(System.nanoTime()).as("the reading thread idle within 10 s").isLessThan(deadline);
                Thread.sleep(1);
            }
        }
    }

    /**
     * Two bugs reviews found. A caller's continuation runs on the reading thread of one of the store's connections,
     * and a reset made there went on that very connection when the thread's lane was its own: it waited for an
     * answer only it could read, until the timeout. Then it went on another connection; but both reading threads,
     * each in a continuation that decides (or resets) and waits, at once, each sent on the other's connection and
     * waited for the other to read its answer, until both timed out and their failures opened the breaker. Such
     * calls now go on the waiting lane, whose reading thread runs no continuation. Both scripts, and a reset.
     */
    @Test
    void readingThreadsThatWaitAtOnceNeverWaitForEachOther() throws Exception {
        Rule window = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("10/1m")));
        Rule gcra = Rule.of(Algorithm.GCRA, List.of(Limit.parse("10/1m")));
        try (RedisStore own = RedisStore.builder(redis.uri()).connections(2).timeout(Duration.ofSeconds(2))
                .raiseFailures(true).build()) {
            java.util.concurrent.CyclicBarrier together = new java.util.concurrent.CyclicBarrier(2);
            List<CompletableFuture<Long>> took = new ArrayList<>();
            for (ScriptConnection connection : own.connections()) {
                CompletableFuture<Long> done = new CompletableFuture<>();
                took.add(done);
                runOnItsReadingThread(connection, () -> {
                    try {
                        together.await(10, TimeUnit.SECONDS);
                        long start = System.nanoTime();
                        own.decide(window, "waiting-window", 1, Store.STORE_CLOCK);
                        own.decide(gcra, "waiting-gcra", 1, Store.STORE_CLOCK);
                        own.reset(window, "elsewhere");
                        done.complete(System.nanoTime() - start);
                    } catch (Exception e) {
                        done.completeExceptionally(e);
                    }
                });
            }
            for (CompletableFuture<Long> done : took) {
                assertThat(done.get(20, TimeUnit.SECONDS)).as("two decisions and a reset, not a timeout")
                        .isLessThan(TimeUnit.SECONDS.toNanos(1));
            }
            assertThat(own.decide(window, "waiting-window", 1, Store.STORE_CLOCK).remaining()).isEqualTo(7);
            assertThat(own.decide(gcra, "waiting-gcra", 1, Store.STORE_CLOCK).remaining()).isEqualTo(7);
            assertThat(own.counts().failures()).isZero();
        }
    }

    /** The clients of a Redis, one line each of CLIENT LIST (this test's own connection among them). */
    private static List<String> clients(Resp resp) throws IOException {
        return List.of(String.valueOf(resp.call("CLIENT", "LIST")).split("\\n"));
    }

    /**
     * The general script, too, gives a key decided on the server's clock a TTL of its {@code reset_after}: here
     * the hour limit's, the longer of the two, so the minute limit's state is not dropped with a key still counting.
     */
    @Test
    void theGeneralScriptLetsAKeyExpireAfterItsLongestLimitsReset() throws IOException {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.SLIDING_WINDOW).limit("10/1m").limit("100/1h")
                .store(store).build();
        Decision first = limiter.tryAcquire("expiring-user", 3);
        assertThat(first.allowed()).isTrue();
        long resetMs = first.resetAfterNanos() / 1_000_000;
        // a sliding window is untouched once the window after this one has ended too: (w + 2)·P − t, in (P, 2P]
        assertThat(first.limitResetAfterNanos()).as("the minute limit's").isGreaterThan(60 * S).isLessThanOrEqualTo(120 * S);
        assertThat(resetMs).as("the hour limit's: the rest of this hour's window, and the next")
                .isGreaterThan(3_600_000L).isLessThanOrEqualTo(7_200_000L);
        try (Resp resp = redis.connect()) {
            long ttl = (Long) resp.call("PTTL", "sluice:{expiring-user}");
            assertThat(ttl).as("reset_after (%d ms) less the time since the decision", resetMs)
                    .isBetween(resetMs - 5_000, resetMs + 1);
            assertThat((String) resp.call("GET", "sluice:{expiring-user}")).doesNotStartWith("g");
        }
    }

    @Test
    void aRuleOfOneGcraLimitIsDecidedByTheLeanerScriptAndAnyOtherByTheGeneralOne() throws Exception {
        try (RedisServer fresh = RedisServer.start(); RedisStore own = SharedRedis.exacting(fresh.uri());
             Resp resp = fresh.connect()) {
            String gcra = sha1("gcra.lua");
            String general = sha1("decide.lua");
            RateLimiter.builder().algorithm(Algorithm.TOKEN_BUCKET).limit("10/1s").store(own).build().tryAcquire("a");
            assertThat(resp.call("SCRIPT", "EXISTS", gcra, general)).isEqualTo(List.of(1L, 0L));
            RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1s").limit("100/1m").store(own).build().tryAcquire("b");
            assertThat(resp.call("SCRIPT", "EXISTS", gcra, general)).isEqualTo(List.of(1L, 1L));
            // each reads what the other wrote: the lean script's binary state, the general one's text
            Rule one = Rule.of(Algorithm.GCRA, List.of(Limit.parse("3/1s")));
            Rule same = Rule.of(Algorithm.GCRA, List.of(Limit.parse("3/1s"), Limit.parse("1000000/1s")));
            long t = 1_700_000_000L * S;
            assertThat(own.decide(one, "shared", 2, t).remaining()).isEqualTo(1);
            assertThat(((String) resp.call("GET", "sluice:{shared}"))).startsWith("g");
            assertThat(own.decide(same, "shared", 1, t).remaining()).isZero();
            assertThat(((String) resp.call("GET", "sluice:{shared}"))).startsWith("1700000000000 0|");
            Decision third = own.decide(one, "shared", 1, t);
            assertThat(third.allowed()).isFalse();
            assertThat(third.retryAfterNanos()).isEqualTo(333_333_334L);
        }
    }

    private static String sha1(String resource) throws Exception {
        try (java.io.InputStream in = RedisStore.class.getResourceAsStream(resource)) {
            byte[] digest = java.security.MessageDigest.getInstance("SHA-1").digest(in.readAllBytes());
            return java.util.HexFormat.of().formatHex(digest);
        }
    }

    /** A bug pinned: the 50 ms call timeout also bounded the connection's handshake, and a busy machine missed it. */
    @Test
    void connectingIsNotBoundByTheCallTimeout() throws Exception {
        try (RedisServer slow = RedisServer.start()) {
            var sleeping = slow.sleep("0.3"); // Redis answers nothing, handshakes included, for 300 ms
            Thread.sleep(50);
            try (RedisStore store = RedisStore.builder(slow.uri()).timeout(Duration.ofMillis(50)).build()) {
                assertThat(store.healthy()).isTrue();
            }
            sleeping.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aRejectionWritesNothing() throws IOException {
        Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1h")));
        long t = 1_700_000_000L * S;
        assertThat(store.decide(rule, "quiet", 1, t).allowed()).isTrue();
        try (Resp resp = redis.connect()) {
            String before = (String) resp.call("GET", "sluice:{quiet}");
            long pttl = (Long) resp.call("PTTL", "sluice:{quiet}");
            assertThat(store.decide(rule, "quiet", 1, t + S).allowed()).isFalse();
            assertThat(resp.call("GET", "sluice:{quiet}")).isEqualTo(before);
            assertThat((Long) resp.call("PTTL", "sluice:{quiet}")).isLessThanOrEqualTo(pttl);
        }
    }

    @Test
    void reloadsTheScriptWhenRedisHasForgottenIt() throws IOException {
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("2/1s")));
        long t = 1_700_000_000L * S;
        assertThat(store.decide(rule, "forgetful", 1, t).remaining()).isEqualTo(1);
        try (Resp resp = redis.connect()) {
            resp.call("SCRIPT", "FLUSH");
        }
        assertThat(store.decide(rule, "forgetful", 1, t).remaining()).isZero();
        assertThat(store.decideAsync(rule, "forgetful", 0, t).toCompletableFuture().join().remaining()).isZero();
    }

    @Test
    void resetDeletesTheKey() throws IOException {
        Rule rule = Rule.of(Algorithm.SLIDING_LOG, List.of(Limit.parse("1/1h")));
        store.decide(rule, "gone", 1, 1_700_000_000L * S);
        store.reset(rule, "gone");
        try (Resp resp = redis.connect()) {
            assertThat(resp.call("EXISTS", "sluice:{gone}")).isEqualTo(0L);
        }
    }

    /**
     * A review found a key holding a lone surrogate written to Redis with a '?' in its place (UTF-8 has no bytes for
     * it), so that it shared the counter of another key. It is refused, naming where; a pair is one code point, kept.
     */
    @Test
    void aKeyWithALoneSurrogateIsRefusedNotCountedAsAnother() {
        Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1h")));
        long t = 1_700_000_000L * S;
        String lone = "surrogate-user" + (char) 0xD800;
        assertThatThrownBy(() -> store.decide(rule, lone, 1, t)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("key \"surrogate-user\uFFFD\" holds a lone surrogate at char 14: a Redis key is UTF-8, which has no"
                        + " bytes for it");
        assertThatThrownBy(() -> store.decideAsync(rule, (char) 0xDC00 + "x", 1, t).toCompletableFuture().join())
                .hasCauseInstanceOf(IllegalArgumentException.class).hasMessageContaining("at char 0");
        assertThatThrownBy(() -> store.decide(rule, "a" + (char) 0xD800 + "b", 1, t)).hasMessageContaining("at char 1");
        assertThat(store.decide(rule, "surrogate-user?", 1, t).allowed()).as("surrogate-user? untouched").isTrue();
        String pair = "surrogate-user" + new String(Character.toChars(0x1F600));
        assertThat(store.decide(rule, pair, 1, t).allowed()).isTrue();
        assertThat(store.decide(rule, pair, 1, t).allowed()).as("a pair is a key like any").isFalse();
    }

    @Test
    void refusesLimitsBeyondWhatLuaComputesExactly() {
        long t = 1_700_000_000L * S;
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.GCRA, List.of(Limit.of(10, 1_500_000L))), "k", 1, t))
                .hasMessage("limit 10/1500us is beyond the Redis store: its period is not a whole number of "
                        + "milliseconds, the unit the scripts keep times in");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/200d"))), "k", 1, t))
                .hasMessageContaining("its period is 2^53 ns (104.2 days) or longer");
        // the bound is 2^53 ns, 104.2 days, not 104 days as the message once said: the longest whole number of
        // milliseconds under it is a period the store decides (found by walking through the docs)
        assertThat(store.decide(Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.of(10, 9_007_199_254_000_000L))), "longest",
                1, t).allowed()).isTrue();
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.of(10, 9_007_199_255_000_000L))),
                "k", 1, t)).hasMessageContaining("its period is 2^53 ns (104.2 days) or longer");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.SLIDING_WINDOW, List.of(Limit.parse("1000000000/30d"))), "k", 1, t))
                .hasMessageContaining("L × P(ms) is 2^53 or more");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.GCRA, List.of(Limit.parse("100000000/1s burst=100000000"))), "k", 1, t))
                .hasMessageContaining("B × L is 2^53 or more");
        // a past bug, found by the far-end traces: B × L past 2^63 wrapped round and was let by, and gcra.lua's c·T
        // rounded (2^40 a second: a fresh key rejected a cost of 999,999,937)
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.GCRA, List.of(Limit.parse("1099511627776/1s"))), "k", 1, t))
                .hasMessageContaining("B × L is 2^53 or more");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.TOKEN_BUCKET,
                List.of(Limit.parse("1000000000000/3ms burst=1099511627776"))), "k", 1, t))
                .hasMessageContaining("B × L is 2^53 or more");
        // and products that wrap to a negative number: B × L of exactly 2^63, and L × P(ms) of 2^63
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.GCRA,
                List.of(Limit.parse("2147483648/1s burst=4294967296"))), "k", 1, t))
                .hasMessageContaining("B × L is 2^53 or more");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.FIXED_WINDOW,
                List.of(Limit.of(1099511627776L, 8_388_608L * 1_000_000L))), "k", 1, t))
                .hasMessageContaining("L × P(ms) is 2^53 or more");
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/1d burst=100"))), "k", 1, t))
                .hasMessageContaining("B × P / L is 2^52 ns (52.1 days) or longer");
        // a sliding window's waits reach two periods, and a sliding log is read whole at each decision (a review)
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.SLIDING_WINDOW, List.of(Limit.parse("1/53d"))), "k", 1, t))
                .hasMessageContaining("a sliding window's two periods reach 2^53 ns");
        assertThat(store.decide(Rule.of(Algorithm.SLIDING_WINDOW, List.of(Limit.parse("1/52d"))), "window", 1, t)
                .allowed()).isTrue();
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.SLIDING_LOG, List.of(Limit.parse("10001/1m"))), "k", 1, t))
                .hasMessageContaining("a sliding log of more than 10000 entries");
        assertThat(store.decide(Rule.of(Algorithm.SLIDING_LOG, List.of(Limit.parse("10000/1m"))), "log", 1, t)
                .allowed()).isTrue();
        // acquire() never asks an interval refill of long periods for a delay the store then refuses (a review)
        RateLimiter longRefills = RateLimiter.builder().store(store).algorithm(Algorithm.TOKEN_BUCKET)
                .limit("2/104d burst=1 refill=interval").build();
        assertThat(store.longestDelayNanos(longRefills.rule())).isEqualTo((1L << 53) - 1 - 104 * 86_400_000_000_000L);
        try {
            assertThat(longRefills.acquire("long-refills", Duration.ofDays(1)).allowed()).isTrue();
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        // an interval refill's reset_after reaches ⌈B / L⌉ periods plus the delay: at the bound, one ms apart
        // (here B × P / L is 30.3 days, within its bound, and ⌈B / L⌉ × P is 60 days)
        Limit twoRefills = Limit.parse("100/30d burst=101 refill=interval");
        long spare = (1L << 53) - 2 * 30 * 86_400_000_000_000L;
        assertThat(store.decide(Rule.of(Algorithm.TOKEN_BUCKET, List.of(twoRefills), Mode.DELAY, spare - 1_000_000L),
                "interval", 1, t).allowed()).isTrue();
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.TOKEN_BUCKET, List.of(twoRefills), Mode.DELAY, spare),
                "k", 1, t)).hasMessage("limit 100/30d burst=101 refill=interval is beyond the Redis store: ⌈B / L⌉ × P"
                        + " plus the max delay (" + dev.sluice.DurationFormat.format(spare) + ") is 2^53 ns (104.2 days)"
                        + " or longer (Lua's numbers are exact only up to 2^53)");
        // an interval refill's debt in delay mode, max_delay / P + 2 refills of max(L, B), stays below 2^53: a review
        // found such a debt rounded past it (a rate of 10^15 a second, a delay of a minute): a cost of 1 lost in it
        Limit vast = Limit.parse("1000000000000/1ms burst=1 refill=interval");
        long debtBound = ((1L << 53) - 1) / 1_000_000_000_000L * 1_000_000L - 1_000_000L - 1; // 9.006 s
        Rule deepest = Rule.of(Algorithm.TOKEN_BUCKET, List.of(vast), Mode.DELAY, debtBound);
        assertThat(store.longestDelayNanos(deepest)).isEqualTo(debtBound);
        assertThatThrownBy(() -> store.decide(Rule.of(Algorithm.TOKEN_BUCKET, List.of(vast), Mode.DELAY, debtBound + 1),
                "k", 1, t)).hasMessage("limit " + vast + " is beyond the Redis store: its debt over the max delay ("
                        + dev.sluice.DurationFormat.format(debtBound + 1) + "), max_delay / P + 2 refills of"
                        + " 1000000000000, reaches 2^53 (Lua's numbers are exact only up to 2^53); at most "
                        + dev.sluice.DurationFormat.format(debtBound) + " here");
        // at the bound, the requests of one instant are decided as in memory, each a period later than the one before
        // (a bucket of 1), the debt growing to its deepest, then rejected
        InMemoryStore memory = new InMemoryStore();
        for (int i = 0; i < 9_020; i++) {
            Decision inMemory = memory.decide(deepest, "debt", 1, t);
            assertThat(store.decide(deepest, "debt", 1, t)).as("request %d", i).isEqualTo(inMemory);
        }
        // a limiter is refused as it is built, not on each of its decisions; the same rule in memory is exact
        assertThatThrownBy(() -> RateLimiter.builder().store(store).algorithm(Algorithm.FIXED_WINDOW).limit("1/200d").build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("its period is 2^53 ns (104.2 days) or longer");
        assertThat(RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1/200d").build().tryAcquire("k")
                .allowed()).isTrue();
        assertThatThrownBy(() -> RedisStore.connect("http://localhost:6379"))
                .hasMessage("bad Redis address \"http://localhost:6379\": expected redis://host:port[/db] or "
                        + "redis-cluster://host:port,host:port or redis-sentinel://host:port,host:port[/db]#primary"
                        + " (rediss://, rediss-cluster://, rediss-sentinel:// for TLS)");
        // an address Lettuce cannot read is refused before anything starts, and its password is never quoted
        assertThatThrownBy(() -> RedisStore.connect("redis://admin:pa{ss@localhost:6379"))
                .hasMessage("bad Redis address \"redis://admin:****@localhost:6379\": not a valid URI (in a password,"
                        + " characters such as a space, /, %, {, # are written percent-encoded: %20 for a space)")
                .hasNoCause();
        // several nodes in a standalone address were read as one host named "127.0.0.1:1,127.0.0.1", found by no lookup
        assertThatThrownBy(() -> RedisStore.connect("redis://127.0.0.1:1,127.0.0.1:2"))
                .hasMessage("bad Redis address \"redis://127.0.0.1:1,127.0.0.1:2\": a standalone Redis is one host:port;"
                        + " several nodes are a Cluster's, redis-cluster://host:port,host:port");
        assertThatThrownBy(() -> RedisStore.connect("redis://localhost:99999"))
                .hasMessage("bad Redis address \"redis://localhost:99999\": port \"99999\" of localhost:99999: expected 1"
                        + " to 65535");
    }

    /**
     * A past bug: Lettuce reads {@code host:0} and {@code host:} as port 6379, so the store connected to whatever
     * Redis listened there, and {@code host:abc} as a host of that name; each is now refused before anything starts.
     * And, found by a review of what is logged: a password with a / had its end quoted as a port Lettuce could not
     * read; one with a # or ? was taken by Lettuce for the host (no password sent, its start shown as the host); one
     * with a comma in a Cluster's address showed its start as a node. None quotes any piece of the password now.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource(delimiter = '|', value = {
            "redis://127.0.0.1:0|bad Redis address \"redis://127.0.0.1:0\": port \"0\" of 127.0.0.1:0: expected 1 to 65535",
            "redis://127.0.0.1:|bad Redis address \"redis://127.0.0.1:\": port \"\" of 127.0.0.1:: expected 1 to 65535",
            "redis://127.0.0.1:abc|bad Redis address \"redis://127.0.0.1:abc\": port \"abc\" of 127.0.0.1:abc: expected 1 to 65535",
            "redis://127.0.0.1:-5|bad Redis address \"redis://127.0.0.1:-5\": port \"-5\" of 127.0.0.1:-5: expected 1 to 65535",
            "redis://|bad Redis address \"redis://\": no host; expected redis://host:port[/db]",
            "redis://:6379|bad Redis address \"redis://:6379\": no host; expected redis://host:port[/db]",
            "redis://:s3cret@/0|bad Redis address \"redis://:****@/0\": no host; expected redis://host:port[/db]",
            "redis://h:6379/99999999999|bad Redis address \"redis://h:6379/99999999999\": database \"99999999999\": expected a number from 0 to 2147483647",
            "redis://h:6379/-1|bad Redis address \"redis://h:6379/-1\": database \"-1\": expected a number from 0 to 2147483647",
            "redis://h:6379/x?timeout=1s|bad Redis address \"redis://h:6379/x?timeout=1s\": database \"x\": expected a number from 0 to 2147483647",
            "redis://:s3cret@[::1]:0/2|bad Redis address \"redis://:****@[::1]:0/2\": port \"0\" of :****@[::1]:0/2: expected 1 to 65535",
            "redis-cluster://127.0.0.1:7000,|bad Redis address \"redis-cluster://127.0.0.1:7000,\": a node is missing between commas; expected redis-cluster://host:port,host:port",
            "redis-cluster://127.0.0.1:7000/3|bad Redis address \"redis-cluster://127.0.0.1:7000/3\": a Cluster has only database 0, got /3",
            "redis-cluster://:a@h1:1,:a@h2:x|bad Redis address \"redis-cluster://:****@h1:1,:****@h2:x\": port \"x\" of :****@h2:x: expected 1 to 65535",
            "redis-cluster://:a@b,c@h1:7000|bad Redis address \"redis-cluster://:****@h1:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis-cluster://:a@h1:7000,:b@h2:7000|bad Redis address \"redis-cluster://:****@h2:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis-sentinel://ab#cd@h1:26379|bad Redis address \"redis-sentinel://****@h1:26379\": a # in the credentials (in a password, written %23); the primary's name comes after the nodes: redis-sentinel://host:port,host:port#name",
            "redis-sentinel://app:12#34@h1:26379,h2:26379|bad Redis address \"redis-sentinel://app:****@h1:26379,h2:26379\": a # in the credentials (in a password, written %23); the primary's name comes after the nodes: redis-sentinel://host:port,host:port#name",
            "redis-cluster://:pa,ss@h1:1,h2:x|bad Redis address \"redis-cluster://:****@h1:1,h2:x\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis-cluster://default:abc,def@h1:7000,h2:7000|bad Redis address \"redis-cluster://default:****@h1:7000,h2:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis-cluster://default:1234,5678@h1:7000|bad Redis address \"redis-cluster://default:****@h1:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis-cluster://s3cret,tail@h1:7000,h2:7000|bad Redis address \"redis-cluster://****@h1:7000,h2:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "redis://redis_1:6379|bad Redis address \"redis://redis_1:6379\": its host is read as \"redis_1:6379\", not \"redis_1\" as written (a host name is letters, digits, - and .)",
            "redis://:abc/def+ghi=@host:6379|bad Redis address \"redis://:****@host:6379\": not a valid URI (in a password, characters such as a space, /, %, {, # are written percent-encoded: %20 for a space)",
            "redis://:pa#ss@host:6379|bad Redis address \"redis://:****@host:6379\": not read as written (in a password, characters such as #, ?, /, @ and , are written percent-encoded: %23 for #)",
            "redis://:pa?ss@host:6379|bad Redis address \"redis://:****@host:6379\": not read as written (in a password, characters such as #, ?, /, @ and , are written percent-encoded: %23 for #)",
            "redis://user:pa#ss@host:6379/2|bad Redis address \"redis://user:****@host:6379/2\": not read as written (in a password, characters such as #, ?, /, @ and , are written percent-encoded: %23 for #)",
    })
    void anAddressLettuceWouldMisreadIsRefusedNamingIt(String uri, String message) {
        assertThatThrownBy(() -> RedisStore.checkAddress(uri)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage(message);
        assertThatThrownBy(() -> RedisStore.connect(uri)).hasMessage(message);
    }

    /**
     * Past bugs: {@code acquire} with a long maxWait threw on Redis for a max delay the rule never declared, and
     * each {@code acquire} made a new rule, which filled the store's per-rule calls and cleared them every 1,024.
     */
    @Test
    void acquireReservesWithinWhatRedisKeepsExactAndReusesItsRule() throws Exception {
        try (RedisServer fresh = RedisServer.start(); RedisStore own = RedisStore.connect(fresh.uri())) {
            RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1s").store(own)
                    .sleeper(nanos -> { }).build();
            assertThat(limiter.acquire("k", Duration.ofDays(60)).allowed()).isTrue();
            for (int i = 0; i < 2_000; i++) {
                limiter.acquire("key-" + i, Duration.ofMillis(100));
            }
            assertThat(own.rulesKept()).as("the limiter's rule and one delaying rule per maxWait").isLessThanOrEqualTo(3);
        }
    }

    /** A past bug: an address with a password and no port was refused, its password quoted as the port. */
    @Test
    void anAddressWithCredentialsAndNoPortIsRead() {
        for (String uri : List.of("redis://:s3cret@redis-host", "redis://user:pw@host/0", "redis://:pw@[::1]",
                "redis://admin:p@ss:w0rd@10.0.0.1", "redis://:pw@host:6380/2?timeout=5s")) {
            org.assertj.core.api.Assertions.assertThatCode(() -> RedisStore.checkAddress(uri)).as(uri)
                    .doesNotThrowAnyException();
        }
    }

    /** A remembered rejection is forgotten by a reset, whichever of the limiter's rules remembered it. */
    @Test
    void aResetForgetsRejectionsRememberedForAcquireToo() throws Exception {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1h").store(store)
                .sleeper(nanos -> { }).build();
        String key = "reset-" + System.nanoTime();
        assertThat(limiter.acquire(key, Duration.ofMillis(100)).allowed()).isTrue();
        assertThat(limiter.acquire(key, Duration.ofMillis(100)).allowed()).as("remembered under the delaying rule").isFalse();
        limiter.reset(key);
        assertThat(limiter.acquire(key, Duration.ofMillis(100)).allowed()).as("asked again, and untouched").isTrue();
    }

    /**
     * A bug a review found: a decision Redis rejected just before a reset's {@code DEL}, and answered after the
     * reset had forgotten the key's rejections, remembered its rejection again; the process then went on
     * rejecting the reset key (here for an hour) without asking Redis.
     */
    @Test
    void aRejectionAnsweredAcrossAResetIsNotRemembered() throws Exception {
        try (RedisServer fresh = RedisServer.start(); Resp resp = fresh.connect();
             RedisStore own = RedisStore.builder(fresh.uri()).timeout(Duration.ofSeconds(2)).build()) {
            Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1h")));
            assertThat(own.decide(rule, "k", 1, RedisStore.STORE_CLOCK).allowed()).isTrue();
            // Redis holds every command a while, so the reset below surely begins before the decision's answer
            resp.call("CLIENT", "PAUSE", "300", "ALL");
            CompletableFuture<Decision> rejected = own.decideAsync(rule, "k", 1, RedisStore.STORE_CLOCK)
                    .toCompletableFuture();
            own.reset(rule, "k"); // the same thread, so the same connection: Redis runs the decision, then the DEL
            assertThat(rejected).isDone();
            assertThat(rejected.get().allowed()).isFalse();
            long before = own.counts().localRejections();
            assertThat(own.decide(rule, "k", 1, RedisStore.STORE_CLOCK).allowed()).as("asked Redis, reset there")
                    .isTrue();
            assertThat(own.counts().localRejections()).isEqualTo(before);
        }
    }

    /**
     * A bug a review found: an expired rejection was dropped only when its key asked again, so keys that come and
     * go filled a rule's memory with expired ones, and it remembered nothing more for good. A full memory is now
     * swept of them; one full of rejections still running stays at its bound.
     */
    @Test
    void aMemoryFullOfExpiredRejectionsIsSweptAndRemembersAgain() throws Exception {
        try (RedisStore own = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(2)).rememberAtMost(10)
                .build()) {
            // rejections of a second: the twenty round trips before the first is looked at must not outlast it on a
            // busy machine (a review found 300 ms tight)
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/1s")));
            String prefix = "swept-" + System.nanoTime() + "-";
            for (int i = 0; i < 10; i++) {
                admittedThenRejected(own, rule, prefix + i, 1, 1);
            }
            assertThat(localRejection(own, rule, prefix + 0)).as("the tenth is remembered").isTrue();
            admittedThenRejected(own, rule, prefix + "full", 1, 1);
            assertThat(localRejection(own, rule, prefix + "full")).as("an eleventh is not: the memory is full").isFalse();
            Thread.sleep(1_100); // every rejection above has expired
            admittedThenRejected(own, rule, prefix + "fresh", 1, 1);
            assertThat(localRejection(own, rule, prefix + "fresh")).as("remembered after the sweep").isTrue();
        }
    }

    /**
     * A review found: a sweep set the next one by the earliest expiry it left, and rejections remembered after it,
     * which expire sooner, waited that out; the memory sat full of them. Here two rejections of 10 s stay while the
     * short ones (1 s: a stall of the test shorter than that changes nothing) come and go: the memory still takes a
     * new one once they have expired.
     */
    @Test
    void aRejectionRememberedAfterASweepBringsTheNextOneForward() throws Exception {
        try (RedisStore own = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(2)).rememberAtMost(4)
                .build()) {
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("10/10s burst=10")));
            String prefix = "forward-" + System.nanoTime() + "-";
            java.util.function.BiConsumer<String, Long> rejected = (key, cost) ->
                    admittedThenRejected(own, rule, prefix + key, 10, cost);
            rejected.accept("long-1", 10L); // retry_after 10 s
            rejected.accept("long-2", 10L);
            rejected.accept("short-1", 1L); // retry_after 1 s
            rejected.accept("short-2", 1L);
            Thread.sleep(1_200);
            rejected.accept("short-3", 1L); // full: a sweep drops short-1 and 2, and is next due as long-1 expires
            rejected.accept("short-4", 1L);
            Thread.sleep(1_200); // short-3 and 4 have expired; the memory is full of two long ones and them
            rejected.accept("short-5", 1L);
            assertThat(localRejection(own, rule, prefix + "short-5")).as("swept, and remembered").isTrue();
        }
    }

    /**
     * A bug found by trying serve on Redis: a rejection remembered at one cost outlived an admission at another,
     * so the key, charged since, was answered from memory with the remaining and retry_after of before (obeying
     * its Retry-After met another 429). An admission forgets the key's rejections; the next is Redis's, and it is
     * the in-memory store's.
     */
    @Test
    void anAdmissionForgetsTheKeysRememberedRejections() throws Exception {
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("5/1m burst=3")));
        String key = "charged-" + System.nanoTime();
        InMemoryStore memory = new InMemoryStore();
        long t = 1_000 * S;
        for (long cost : new long[] {1, 1, 2, 1}) {
            memory.decide(rule, key, cost, t);
        }
        Decision expected = memory.decide(rule, key, 2, t);
        assertThat(store.decide(rule, key, 1, RedisStore.STORE_CLOCK).allowed()).isTrue();
        assertThat(store.decide(rule, key, 1, RedisStore.STORE_CLOCK).allowed()).isTrue();
        Decision first = store.decide(rule, key, 2, RedisStore.STORE_CLOCK);
        assertThat(first.allowed()).isFalse();
        assertThat(first.remaining()).isEqualTo(1);
        assertThat(store.decide(rule, key, 1, RedisStore.STORE_CLOCK).allowed()).as("another cost fits").isTrue();
        long before = store.counts().localRejections();
        Decision after = store.decide(rule, key, 2, RedisStore.STORE_CLOCK);
        assertThat(store.counts().localRejections()).as("asked Redis, not the memory").isEqualTo(before);
        assertThat(after.allowed()).isFalse();
        assertThat(after.remaining()).isEqualTo(expected.remaining()).isZero();
        // the server's clock moved on a little between the calls: within a second of the in-memory answer
        assertThat(after.retryAfterNanos()).isBetween(expected.retryAfterNanos() - S, expected.retryAfterNanos());
    }

    /** Asserts that Redis admits {@code key} at {@code admitted}, then rejects it at {@code rejected}. */
    private static void admittedThenRejected(RedisStore store, Rule rule, String key, long admitted, long rejected) {
        assertThat(store.decide(rule, key, admitted, RedisStore.STORE_CLOCK).allowed()).as("%s admitted", key).isTrue();
        assertThat(store.decide(rule, key, rejected, RedisStore.STORE_CLOCK).allowed()).as("%s rejected", key).isFalse();
    }

    /** Whether a decision of {@code key} is a rejection answered from the store's memory, not by Redis. */
    private static boolean localRejection(RedisStore store, Rule rule, String key) {
        long before = store.counts().localRejections();
        Decision decision = store.decide(rule, key, 1, RedisStore.STORE_CLOCK);
        return !decision.allowed() && store.counts().localRejections() == before + 1;
    }

    /** Found by trying the CLI: a host that does not resolve was named alone ("cannot connect: h.invalid"). */
    @Test
    void aHostThatDoesNotResolveIsSaidToBeUnknown() {
        assertThatThrownBy(() -> RedisStore.connect("redis://no-such-host.invalid:6379"))
                .hasMessageContaining("unknown host no-such-host.invalid");
    }

    @Test
    void badSettingsAreRefusedBeforeAnythingStarts() {
        RedisStore.Builder builder = RedisStore.builder("redis://127.0.0.1:1");
        assertThatThrownBy(() -> builder.timeout(null)).hasMessage("timeout must be > 0 and at most a day, got null");
        assertThatThrownBy(() -> builder.timeout(Duration.ofSeconds(Long.MAX_VALUE)))
                .hasMessageStartingWith("timeout must be > 0 and at most a day, got PT");
        assertThatThrownBy(() -> builder.breaker(1, Duration.ofSeconds(Long.MAX_VALUE)))
                .hasMessageStartingWith("the breaker needs failures >= 1 and a time > 0 and at most a day, got 1 and PT");
        assertThatThrownBy(() -> builder.breaker(1, null)).hasMessageStartingWith("the breaker needs");
        assertThatThrownBy(() -> builder.onFailure(null)).hasMessage("a failure policy is required: OPEN or CLOSED");
        assertThatThrownBy(() -> RedisStore.connect(null)).hasMessage("bad Redis address: null; expected"
                + " redis://host:port[/db] or redis-cluster://host:port,host:port or"
                + " redis-sentinel://host:port,host:port[/db]#primary (rediss://, rediss-cluster://, rediss-sentinel://"
                + " for TLS)");
    }

    /** The counts of INFO commandstats, by command. */
    private static long calls(Resp resp, String command) throws IOException {
        String info = (String) resp.call("INFO", "commandstats");
        for (String line : info.split("\r\n")) {
            if (line.startsWith("cmdstat_" + command + ":calls=")) {
                return Long.parseLong(line.substring(line.indexOf('=') + 1, line.indexOf(',')));
            }
        }
        return 0;
    }

    /** One connection per core (at least two), so that no single connection paces every caller. */
    @Test
    void callersAreSpreadOverSeveralConnections() throws Exception {
        try (RedisServer fresh = RedisServer.start(); RedisStore own = SharedRedis.exacting(fresh.uri());
             Resp resp = fresh.connect()) {
            RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1000/1s").store(own).build();
            for (int i = 0; i < 4; i++) {
                String key = "caller-" + i;
                Thread caller = new Thread(() -> limiter.tryAcquire(key));
                caller.start();
                caller.join();
            }
            List<String> clients = ((String) resp.call("CLIENT", "LIST")).lines().toList();
            assertThat(clients).as("the store's connections and this one").hasSizeGreaterThanOrEqualTo(3);
            assertThat(clients.stream().filter(client -> client.contains("cmd=evalsha")))
                    .as("consecutive threads on different connections").hasSizeGreaterThanOrEqualTo(2);
        }
    }

    @Test
    void oneEvalshaAndThreeCommandsInsideItPerAdmittedDecision() throws IOException {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1000000/1s").store(store).build();
        try (Resp resp = redis.connect()) {
            limiter.tryAcquire("warm");
            resp.call("CONFIG", "RESETSTAT");
            for (int i = 0; i < 100; i++) {
                assertThat(limiter.tryAcquire("counted").allowed()).isTrue();
            }
            assertThat(calls(resp, "evalsha")).isEqualTo(100);
            assertThat(calls(resp, "time")).isEqualTo(100);
            assertThat(calls(resp, "get")).isEqualTo(100);
            assertThat(calls(resp, "psetex")).isEqualTo(100);
        }
    }

    /**
     * 200 decisions on one key handed over at once from one thread: they leave many to a call of gcra.lua, and
     * still exactly 10 are admitted, the first 10, each with the remaining a call of its own would answer. The
     * store remembers no rejection: once failed on CI, the first call answered while this thread was still
     * handing decisions over, the rest were answered as remembered rejections without Redis, and 3 calls were
     * counted where 200 decisions through Redis take at least 4.
     */
    @Test
    void decisionsWaitingOnOneConnectionLeaveTogetherAndStayExact() throws Exception {
        try (RedisServer fresh = RedisServer.start();
             RedisStore own = RedisStore.builder(fresh.uri()).timeout(Duration.ofSeconds(10)).raiseFailures(true)
                     .rememberRejections(false).build();
             Resp resp = fresh.connect()) {
            List<Decision> decisions = allAtOnce(own, resp, "together", 200);
            for (int i = 0; i < 200; i++) {
                Decision decision = decisions.get(i);
                assertThat(decision.allowed()).as("decision %d", i).isEqualTo(i < 10);
                assertThat(decision.remaining()).as("decision %d", i).isEqualTo(Math.max(0, 9 - i));
            }
            long calls = calls(resp, "evalsha");
            assertThat(calls).as("calls for 200 decisions, at most 64 to a call").isBetween(4L, 10L);
            assertThat(calls(resp, "get")).isEqualTo(200);
            assertThat(calls(resp, "psetex")).as("only admissions write").isEqualTo(10);
            assertThat(calls(resp, "time")).as("the clock read once a call").isEqualTo(calls);
        }
    }

    /**
     * {@code count} decisions on {@code key} under gcra 10/1h, handed to {@code store} at once from this thread
     * (so on one connection), after a first decision and a reset of Redis's command counts; in order.
     */
    /**
     * Redis answers no one for 200 ms: the first call handed over waits in Redis meanwhile, and every decision
     * handed over after it waits for it, as they would behind any round trip. Without this the test thread, slowed
     * by other work on the machine, could hand each decision over after the one before had its answer (once
     * failed so: 40 decisions in 40 calls, and 200 in 51).
     */
    private static void holdAnswers(Resp resp) throws IOException {
        resp.call("CLIENT", "PAUSE", "200");
    }

    private static List<Decision> allAtOnce(RedisStore store, Resp resp, String key, int count) throws Exception {
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("10/1h").store(store).build();
        limiter.tryAcquire("warm");
        resp.call("CONFIG", "RESETSTAT");
        holdAnswers(resp);
        List<CompletableFuture<Decision>> inFlight = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            inFlight.add(limiter.tryAcquireAsync(key).toCompletableFuture());
        }
        List<Decision> decisions = new ArrayList<>();
        for (CompletableFuture<Decision> decision : inFlight) {
            decisions.add(decision.get(10, TimeUnit.SECONDS));
        }
        return decisions;
    }

    /**
     * Decisions at a time passed in and at the server's clock, handed over at once from one thread, so that calls
     * of gcra.lua carry both kinds (each with its one argument: {@code cost}, or {@code "cost ms ns"}): each
     * decided at its own time, as a call of its own would, and each key's TTL its own kind's (a time passed in keeps
     * a key an hour more).
     */
    @Test
    void oneCallDecidesAtTimesPassedInAndAtTheServersClockTogether() throws Exception {
        try (RedisServer fresh = RedisServer.start();
             RedisStore own = RedisStore.builder(fresh.uri()).timeout(Duration.ofSeconds(10)).raiseFailures(true)
                     .rememberRejections(false).build();
             Resp resp = fresh.connect()) {
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("10/1m"))); // T = 6 s
            own.decide(rule, "warm", 1, Store.STORE_CLOCK);
            resp.call("CONFIG", "RESETSTAT");
            holdAnswers(resp);
            long at = 1_000L * S + 123_456_789L; // a time passed in: 1,000.123456789 s after the epoch
            List<CompletableFuture<Decision>> passed = new ArrayList<>();
            List<CompletableFuture<Decision>> server = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                passed.add(own.decideAsync(rule, "passed", 2, at + i * 500_000_000L).toCompletableFuture());
                server.add(own.decideAsync(rule, "server-" + i, 3, Store.STORE_CLOCK).toCompletableFuture());
            }
            // in memory, one key at 0.5 s steps, 2 at a time: 5 admitted (burst 10), then one every 12 s
            InMemoryStore memory = new InMemoryStore();
            for (int i = 0; i < 20; i++) {
                Decision expected = memory.decide(rule, "passed", 2, at + i * 500_000_000L);
                Decision got = passed.get(i).get(10, TimeUnit.SECONDS);
                assertThat(got.allowed()).as("decision %d", i).isEqualTo(expected.allowed());
                assertThat(got.remaining()).as("decision %d", i).isEqualTo(expected.remaining());
                assertThat(got.retryAfterNanos()).as("decision %d", i).isEqualTo(expected.retryAfterNanos());
                assertThat(got.resetAfterNanos()).as("decision %d", i).isEqualTo(expected.resetAfterNanos());
                Decision fresh3 = server.get(i).get(10, TimeUnit.SECONDS);
                assertThat(fresh3.allowed()).isTrue();
                assertThat(fresh3.remaining()).isEqualTo(7);
                assertThat(fresh3.resetAfterNanos()).isEqualTo(18 * S);
            }
            assertThat(calls(resp, "evalsha")).as("40 decisions in fewer calls").isLessThan(40L);
            assertThat((Long) resp.call("PTTL", "sluice:{passed}")).as("an hour more").isGreaterThan(3_600_000L);
            assertThat((Long) resp.call("PTTL", "sluice:{server-7}")).isBetween(1L, 18_000L);
        }
    }

    /**
     * {@code batch(1)} sends each decision alone: one call each, as a pipeline (no rejection remembered, for the
     * reason the test above gives).
     */
    @Test
    void aBatchOfOneSendsEveryDecisionAlone() throws Exception {
        try (RedisServer fresh = RedisServer.start();
             RedisStore alone = RedisStore.builder(fresh.uri()).timeout(Duration.ofSeconds(10)).raiseFailures(true)
                     .rememberRejections(false).batch(1).build();
             Resp resp = fresh.connect()) {
            List<Decision> decisions = allAtOnce(alone, resp, "alone", 50);
            for (int i = 0; i < 50; i++) {
                assertThat(decisions.get(i).allowed()).as("decision %d", i).isEqualTo(i < 10);
            }
            assertThat(calls(resp, "evalsha")).isEqualTo(50);
        }
        assertThatThrownBy(() -> RedisStore.builder("redis://localhost:1").batch(0))
                .hasMessage("a batch holds at least 1 decision, got 0");
    }

    /**
     * Each algorithm whose rejections are remembered by default: gcra and token-bucket 2/4s refill one unit in
     * 2 s; a fixed window of 2 s, entered just after it starts, ends about 2 s later. Time enough for the calls
     * below on a slow machine. With a second, longer limit beside it (decided by decide.lua, not gcra.lua), the
     * remembered answer still names the limit that rejected and counts down that limit's own reset.
     */
    @ParameterizedTest
    @CsvSource({"gcra, 2/4s", "token-bucket, 2/4s", "fixed-window, 2/2s",
            "gcra, 2/4s 50/1h", "token-bucket, 2/4s 50/1h", "fixed-window, 2/2s 50/1h"})
    void aRejectionIsRememberedUntilItsRetryAfterWithoutCallingRedis(String algorithm, String limits) throws Exception {
        RateLimiter.Builder builder = RateLimiter.builder().algorithm(Algorithm.parse(algorithm)).store(store);
        for (String limit : limits.split(" ")) {
            builder.limit(limit);
        }
        RateLimiter limiter = builder.build();
        String key = "remembered-" + algorithm + "-" + limits.split(" ").length;
        long before = store.counts().localRejections();
        try (Resp resp = redis.connect()) {
            limiter.tryAcquire("warm-" + key, 0); // the script loaded before the window is entered
            if (algorithm.equals("fixed-window")) {
                Thread.sleep(2_000 - System.currentTimeMillis() % 2_000 + 20);
            }
            assertThat(limiter.tryAcquire(key, 2).allowed()).isTrue();
            long sent = System.nanoTime();
            Decision rejected = limiter.tryAcquire(key);
            long returned = System.nanoTime();
            assertThat(rejected.retryAfterNanos()).isGreaterThan(1_500_000_000L);
            assertThat(rejected.allowed()).isFalse();
            resp.call("CONFIG", "RESETSTAT");
            for (int i = 0; i < 10; i++) {
                if (i == 5) {
                    Thread.sleep(100); // the wait counts down (a review found a constant one would have passed)
                }
                long asked = System.nanoTime();
                Decision local = limiter.tryAcquire(key);
                long answered = System.nanoTime();
                assertThat(local.allowed()).isFalse();
                // remembered between sent and returned, and counted down since: so within these bounds
                assertThat(local.retryAfterNanos()).isPositive()
                        .isLessThanOrEqualTo(rejected.retryAfterNanos() - (asked - returned))
                        .isGreaterThanOrEqualTo(rejected.retryAfterNanos() - (answered - sent));
                assertThat(local.limit()).isEqualTo(rejected.limit()).isEqualTo(Limit.parse(limits.split(" ")[0]));
                assertThat(local.remaining()).isEqualTo(rejected.remaining());
                assertThat(local.limitResetAfterNanos()).isLessThanOrEqualTo(rejected.limitResetAfterNanos())
                        .isLessThanOrEqualTo(local.resetAfterNanos());
                assertThat(local.resetAfterNanos()).isLessThanOrEqualTo(rejected.resetAfterNanos());
            }
            assertThat(calls(resp, "evalsha")).as("answered in this process").isZero();
            assertThat(store.counts().localRejections() - before).isEqualTo(10);
            // a peek still asks Redis
            limiter.tryAcquire(key, 0);
            assertThat(calls(resp, "evalsha")).isEqualTo(1);
            // another cost has another answer, which only Redis knows: more than the capacity can never fit, and
            // the whole capacity waits longer than one unit does on the buckets (a remembered answer gave 2 s)
            assertThat(limiter.tryAcquire(key, 3).retryAfterNanos()).isEqualTo(Decision.NEVER);
            Decision whole = limiter.tryAcquire(key, 2);
            assertThat(calls(resp, "evalsha")).isEqualTo(3);
            assertThat(whole.allowed()).isFalse();
            if (!algorithm.equals("fixed-window")) {
                assertThat(whole.retryAfterNanos()).isGreaterThan(rejected.retryAfterNanos());
            }
            Thread.sleep(rejected.retryAfter().toMillis() + 50);
            assertThat(limiter.tryAcquire(key).allowed()).as("after retry_after, Redis admits").isTrue();
        }
    }

    @Test
    void rejectionsAreNotRememberedWhenTurnedOffOrForSlidingAlgorithms() throws Exception {
        // a call that timed out would be admitted by the default policy (open) and read as remembered: none may
        try (RedisStore plain = RedisStore.builder(redis.uri()).rememberRejections(false)
                .timeout(Duration.ofSeconds(10)).raiseFailures(true).build();
             Resp resp = redis.connect()) {
            RateLimiter gcra = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("1/1h").store(plain).build();
            RateLimiter sliding = RateLimiter.builder().algorithm(Algorithm.SLIDING_WINDOW).limit("1/1h").store(store).build();
            gcra.tryAcquire("plain");
            sliding.tryAcquire("sliding");
            resp.call("CONFIG", "RESETSTAT");
            for (int i = 0; i < 5; i++) {
                assertThat(gcra.tryAcquire("plain").allowed()).isFalse();
                assertThat(sliding.tryAcquire("sliding").allowed()).isFalse();
            }
            assertThat(calls(resp, "evalsha")).isEqualTo(10);
        }
    }

    /**
     * A weakness a review found: the store kept what it made for each rule (its script's arguments, its
     * batchers, its remembered rejections) for good, and a server that reloads its configuration makes new
     * rules each time. Past {@link RedisStore#MAX_RULES} rules it starts again, and decides as before.
     */
    @Test
    void rulesPastTheBoundAreDroppedAndDecidedAsBefore() {
        // a window filled before the others, not rejected (so not remembered here): only Redis knows it is full
        Rule early = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("5/1h")));
        assertThat(store.decide(early, "rules-early", 5, RedisStore.STORE_CLOCK).allowed()).isTrue();
        int rules = RedisStore.MAX_RULES + 100;
        for (int i = 1; i <= rules; i++) {
            // each rule fills its window and has a rejection remembered: a call and a rejection kept per rule
            Rule rule = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse(i + "/1h")));
            String key = "rules-" + i;
            assertThat(store.decide(rule, key, i, RedisStore.STORE_CLOCK).allowed()).as("rule %d", i).isTrue();
            Decision rejected = store.decide(rule, key, 1, RedisStore.STORE_CLOCK);
            assertThat(rejected.allowed()).as("rule %d, request %d", i, i + 1).isFalse();
            assertThat(rejected.limit().amount()).isEqualTo(i);
            assertThat(store.rulesKept()).isLessThanOrEqualTo(RedisStore.MAX_RULES);
        }
        assertThat(store.decide(early, "rules-early", 1, RedisStore.STORE_CLOCK).allowed())
                .as("the early rule's call was dropped and made again; its window is still full in Redis").isFalse();
    }

    /**
     * gcra.lua answers binary (the byte allowed, then four little-endian doubles); the connections read every
     * value one char per byte so it arrives whole. Keys still go out as UTF-8: a key beyond ASCII is stored
     * under its UTF-8 bytes and decided alike by both scripts.
     */
    @Test
    void keysBeyondAsciiAreStoredAsUtf8AndDecidedByBothScripts() throws IOException {
        RateLimiter lean = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("2/1h").store(store).build();
        RateLimiter general = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("2/1h").limit("5/1d")
                .store(store).build();
        for (RateLimiter limiter : List.of(lean, general)) {
            String key = limiter == lean ? "clé-ключ-鍵" : "ünïcode-🔑";
            assertThat(limiter.tryAcquire(key).remaining()).isEqualTo(1);
            assertThat(limiter.tryAcquire(key).remaining()).isZero();
            Decision third = limiter.tryAcquire(key);
            assertThat(third.allowed()).isFalse();
            assertThat(third.retryAfterNanos()).isBetween(1_700 * S, 1_800 * S);
            try (Resp resp = redis.connect()) {
                assertThat(resp.call("EXISTS", RedisStore.redisKey(key))).isEqualTo(1L);
            }
        }
    }

    @Test
    void aBinaryAnswerIsReadExactlyAndAMalformedOneNamesWhatIsWrong() {
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("100/1s")));
        // the largest whole numbers the scripts may answer (below 2^53) and NEVER (-1) come back exact
        String answer = binary(0, 99, (1L << 53) - 1, 1_000_000_000L, -1);
        Decision decision = ScriptReplies.decision(rule, answer);
        assertThat(decision.allowed()).isFalse();
        assertThat(decision.remaining()).isEqualTo(99);
        assertThat(decision.retryAfterNanos()).isEqualTo((1L << 53) - 1);
        assertThat(decision.resetAfterNanos()).isEqualTo(1_000_000_000L);
        assertThat(decision.delayNanos()).isEqualTo(-1);
        assertThat(ScriptReplies.decision(rule, binary(1, 0, 0, 0, 0)).allowed()).isTrue();
        assertThat(decision.limitResetAfterNanos()).as("one limit: the key's reset is its").isEqualTo(1_000_000_000L);
        Rule stacked = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("10/1s"), Limit.parse("100/1m")));
        Decision text = ScriptReplies.decision(stacked, "1 7 0 30 0 0 2");
        assertThat(text.remaining()).as("decide.lua's text").isEqualTo(7);
        assertThat(text.resetAfterNanos()).isEqualTo(30);
        assertThat(text.limit()).isEqualTo(Limit.parse("10/1s"));
        assertThat(text.limitResetAfterNanos()).isEqualTo(2);
        assertThatThrownBy(() -> ScriptReplies.decision(stacked, "1 7 0 3 0 0"))
                .hasMessage("expected seven numbers");

        assertThatThrownBy(() -> ScriptReplies.decision(rule, null)).hasMessage("expected a decision, got nil");
        assertThatThrownBy(() -> ScriptReplies.decision(rule, answer.substring(0, 20)))
                .hasMessage("expected 33 bytes, got 20");
        String half = answer.substring(0, 1) + doubleBytes(0.5) + answer.substring(9);
        assertThatThrownBy(() -> ScriptReplies.decision(rule, half)).hasMessage("expected whole numbers, got 0.5");

        String[] two = ScriptReplies.gcraAnswers(answer + binary(1, 3, 0, 4, 0));
        assertThat(two).hasSize(2);
        assertThat(ScriptReplies.decision(rule, two[1]).remaining()).isEqualTo(3);
        assertThatThrownBy(() -> ScriptReplies.gcraAnswers(answer + "1 2 3"))
                .hasMessage("gcra.lua answered 38 bytes, not a multiple of 33");
    }

    /** A decision as gcra.lua packs it ('<Bdddd'), read one char per byte as the store's connections read it. */
    private static String binary(int allowed, long remaining, long retry, long reset, long delay) {
        return (char) allowed + doubleBytes(remaining) + doubleBytes(retry) + doubleBytes(reset) + doubleBytes(delay);
    }

    private static String doubleBytes(double value) {
        byte[] bytes = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putDouble(value).array();
        return new String(bytes, java.nio.charset.StandardCharsets.ISO_8859_1);
    }

    /**
     * Two limiters of different rules on one Redis and the same key names, each with a store of its own namespace,
     * keep apart. Found by a review: stores on one Redis wrote every key at sluice:{<key>}, so a login limiter of
     * 2 a minute, between search requests on the same user, admitted 4 (the search limiter's gcra state read as
     * its sliding window), and "a store of its own" did not help.
     */
    @Test
    void storesOfTheirOwnNamespacesKeepLimitersOfOneKeyApart() throws IOException {
        String uri = redis.uri();
        try (RedisStore logins = RedisStore.builder(uri).namespace("login").timeout(Duration.ofSeconds(10))
                .raiseFailures(true).build();
             RedisStore searches = RedisStore.builder(uri).namespace("search").timeout(Duration.ofSeconds(10))
                     .raiseFailures(true).build()) {
            RateLimiter login = RateLimiter.builder().algorithm(Algorithm.SLIDING_WINDOW).limit("2/1m").store(logins)
                    .build();
            RateLimiter search = RateLimiter.builder().algorithm(Algorithm.GCRA).limit("100/1m").store(searches).build();
            StringBuilder seen = new StringBuilder();
            for (int round = 0; round < 3; round++) {
                seen.append(login.tryAcquire("ns-user").allowed() ? 'A' : 'R');
                for (int i = 0; i < 5; i++) {
                    assertThat(search.tryAcquire("ns-user").allowed()).isTrue();
                }
                seen.append(login.tryAcquire("ns-user").allowed() ? 'A' : 'R');
            }
            assertThat(seen).hasToString("AARRRR");
            assertThat(search.tryAcquire("ns-user").remaining()).as("a token back each 600 ms").isBetween(100L - 16, 100L - 15);
            try (Resp resp = redis.connect()) {
                assertThat(resp.call("EXISTS", "sluice:login:{ns-user}", "sluice:search:{ns-user}")).isEqualTo(2L);
                assertThat(resp.call("EXISTS", "sluice:{ns-user}")).isEqualTo(0L);
            }
        }
    }

    @ParameterizedTest
    @CsvSource(delimiterString = "|", value = {
            "''|a namespace is 1 to 200 characters, none of them a brace, a space, a control character or half a surrogate pair, got \"\"",
            "a{b|got \"a{b\"",
            "a}|got \"a}\"",
            "'a b'|got \"a b\"",
    })
    void aNamespaceThatCannotBeOneIsRefusedByName(String namespace, String message) {
        assertThatThrownBy(() -> RedisStore.builder(redis.uri()).namespace(namespace))
                .isInstanceOf(IllegalArgumentException.class).hasMessageEndingWith(message);
        assertThatThrownBy(() -> RedisStore.builder(redis.uri()).namespace("x".repeat(201)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1 to 200 characters");
        // written "a?" in UTF-8, as the namespace "a?" is (a review)
        assertThatThrownBy(() -> RedisStore.builder(redis.uri()).namespace("a\uD800"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageEndingWith("got \"a\\xd800\"");
    }

    /** Found by a review: after close, every decision was the failure policy's, so every request was admitted. */
    @Test
    void aClosedStoreRefusesEveryCallInsteadOfAdmitting() {
        RedisStore closing = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(10)).build();
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1/1h").store(closing)
                .build();
        assertThat(limiter.tryAcquire("closed-user").allowed()).isTrue();
        assertThat(limiter.tryAcquire("closed-user").allowed()).isFalse();
        closing.close();
        String closed = "the Redis store " + redis.uri() + " is closed";
        assertThatThrownBy(() -> limiter.tryAcquire("closed-user")).isInstanceOf(IllegalStateException.class)
                .hasMessage(closed);
        assertThatThrownBy(() -> limiter.tryAcquire("another-user")).isInstanceOf(IllegalStateException.class)
                .hasMessage(closed);
        assertThatThrownBy(() -> limiter.tryAcquireAsync("another-user").toCompletableFuture().join())
                .hasCauseInstanceOf(IllegalStateException.class).hasRootCauseMessage(closed);
        assertThatThrownBy(() -> limiter.reset("closed-user")).isInstanceOf(IllegalStateException.class)
                .hasMessage(closed);
        assertThat(closing.counts().failures()).isZero();
        assertThat(closing.healthy()).isFalse();
    }

    /**
     * A key with a '}' of its own is hashed whole, not by what comes before that '}' (found by a review: every
     * key tenant}user-N went to one Cluster slot), and is decided and stored as any other.
     */
    @Test
    void keysWithABraceOfTheirOwnSpreadOverTheSlots() throws IOException {
        Set<Integer> slots = new java.util.HashSet<>();
        for (int i = 0; i < 100; i++) {
            slots.add(io.lettuce.core.cluster.SlotHash.getSlot(RedisStore.redisKey("tenant}user-" + i)));
        }
        assertThat(slots).hasSizeGreaterThan(90);
        assertThat(RedisStore.redisKey("plain")).isEqualTo("sluice:{plain}");
        assertThat(RedisStore.redisKey("a}b")).isEqualTo("sluice:{}a}b");
        RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.SLIDING_LOG).limit("2/1m").store(store).build();
        assertThat(limiter.tryAcquire("brace}user").allowed()).isTrue();
        assertThat(limiter.tryAcquire("brace}user").allowed()).isTrue();
        assertThat(limiter.tryAcquire("brace}user").allowed()).isFalse();
        assertThat(limiter.tryAcquire("brace}other").allowed()).isTrue();
        try (Resp resp = redis.connect()) {
            assertThat(resp.call("EXISTS", "sluice:{}brace}user", "sluice:{}brace}other")).isEqualTo(2L);
        }
    }

    /**
     * The sliding log's state: its entries' count and the sum of their costs first, so that a decision reads only
     * the entries that expire and the last one; a state written before the sum was kept is still read as it was
     * (its keys live until their period ends), with the in-memory store's decisions on the same trace.
     */
    @Test
    void aSlidingLogKeepsItsCountAndSumAndStillReadsALogWrittenWithoutTheSum() throws IOException {
        Rule rule = Rule.of(Algorithm.SLIDING_LOG, List.of(Limit.parse("5/1s")));
        long t0 = 1_700_000_000_000L * 1_000_000;
        Store memory = new InMemoryStore();
        memory.decide(rule, "old-log", 1, t0);
        memory.decide(rule, "old-log", 2, t0 + 500_000_123);
        try (Resp resp = redis.connect()) {
            resp.call("SET", "sluice:{old-log}", "1700000000500 123|2 1700000000000 0 1 1700000000500 123 2", "PX", "60000");
            long[] times = {t0 + 600_000_000, t0 + 600_000_000, t0 + 999_999_999, t0 + 1_000_000_000, t0 + 1_500_000_123,
                t0 + 1_500_000_123};
            long[] costs = {1, 2, 1, 2, 2, 1};
            for (int i = 0; i < times.length; i++) {
                assertThat(store.decide(rule, "old-log", costs[i], times[i])).as("decision %d", i)
                        .isEqualTo(memory.decide(rule, "old-log", costs[i], times[i]));
            }
            // 0 and .500000123 gone at 1.500000123, its two requests one entry
            assertThat((String) resp.call("GET", "sluice:{old-log}"))
                    .isEqualTo("1700000001500 123|3 u5 1700000000600 0 1 1700000000999 999999 1 1700000001500 123 3");
            assertThat(store.decide(rule, "old-log", 1, t0 + 1_600_000_000))
                    .isEqualTo(memory.decide(rule, "old-log", 1, t0 + 1_600_000_000));
            assertThat((String) resp.call("GET", "sluice:{old-log}"))
                    .isEqualTo("1700000001600 0|3 u5 1700000000999 999999 1 1700000001500 123 3 1700000001600 0 1");
        }
    }

    /**
     * A limiter made anew for each request (a common way to write it) answers from the rejections remembered for
     * the one before it: their rules are equal. Found by a review: rules were told apart by identity, so such
     * limiters never answered from memory (62 µs a rejection instead of 0.3) and made their scripts again.
     */
    @Test
    void limitersMadeAnewForEachRequestShareTheRejectionsRemembered() {
        try (RedisStore remembering = RedisStore.builder(redis.uri()).timeout(Duration.ofSeconds(10)).build()) {
            java.util.function.Supplier<RateLimiter> perRequest = () -> RateLimiter.builder().algorithm(Algorithm.GCRA)
                    .limit("1/1h").store(remembering).build();
            assertThat(perRequest.get().tryAcquire("anew-user").allowed()).isTrue();
            assertThat(perRequest.get().tryAcquire("anew-user").allowed()).isFalse();
            Decision again = perRequest.get().tryAcquire("anew-user");
            assertThat(again.allowed()).isFalse();
            assertThat(remembering.counts().localRejections()).as("answered from memory").isEqualTo(1);
            assertThat(remembering.rulesKept()).isEqualTo(1);
        }
    }
}
