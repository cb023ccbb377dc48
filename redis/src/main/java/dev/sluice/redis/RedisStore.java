package dev.sluice.redis;

import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.Store;
import dev.sluice.store.StoreUnavailableException;

import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.netty.util.Timer;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The Redis store: many processes share one limit, decided on the Redis server in one round trip.
 *
 * <pre>{@code
 * RateLimiter limiter = RateLimiter.builder().limit("600/1m").store(RedisStore.connect("redis://localhost:6379")).build();
 * }</pre>
 *
 * <h2>One script per decision</h2>
 * Every decision is one {@code EVALSHA} of {@code decide.lua}, or of {@code gcra.lua} for a rule of one gcra
 * limit (gcra, greedy token-bucket, leaky-bucket: the same decisions with less work for Redis); a script is
 * sent whole with {@code EVAL} when a server answers {@code NOSCRIPT}, after a restart or a failover. The script
 * reads the key's state ({@code GET}), the server's clock ({@code TIME}) unless the caller passes a time, decides
 * every limit of the key at once exactly as {@link Rule#decide} does, and, only when it admits, writes the new
 * state with {@code SET ... PX reset_after} ({@code PSETEX} in gcra.lua): at most three commands, no lock, no
 * retry, and hosts whose clocks disagree still agree on every decision. An idle key expires by itself when it is
 * back to untouched.
 *
 * <p>On a standalone Redis, the gcra decisions of one rule that wait on one connection go as one call of
 * {@code gcra.lua} that decides their keys one after the other ({@link Batcher}): a decision never waits for a
 * batch to fill, and a call's own costs (the call, the rule's constants, {@code TIME}) are paid once for all of
 * them. Each decision stays atomic, at most one {@code EVALSHA} and three commands inside it.
 *
 * <h2>Keys</h2>
 * The state of a key lives at {@code sluice:{<key>}} ({@code sluice:<namespace>:{<key>}} in a store given a
 * {@link Builder#namespace}): the braces are a Cluster hash tag, so every limit of a key is in one slot (in one
 * string, in fact) and the script touches one slot. A Redis holds one state per key, whichever rule decides it:
 * limiters of different rules on one Redis need keys of their own, or a namespace each.
 *
 * <h2>Connections</h2>
 * On a standalone Redis the store has connections of its own, one per core and at least two unless
 * {@link Builder#connections} says otherwise ({@link ScriptConnection}): a plain socket written by the caller and
 * read by one thread, with fewer hand-overs between threads than Lettuce's event loop (measured: 16 callers a
 * fifth to a third more decisions a second, 64 half again; bench/README.md). Each calling thread always uses the
 * same one. They carry every decision's call and every reset; a standalone store starts no Lettuce client, event
 * loop or connection.
 *
 * <p>In a Cluster the store uses Lettuce, which follows the slots and the failovers ({@link ClusterLanes}).
 * {@code gcra.lua} answers binary, a decision in 33 bytes (Lua makes numbers text through {@code sprintf},
 * which cost Redis a fifth of a call: the script says more), so the connections read what Redis answers one
 * char per byte ({@link ReplyCodec}) and keys still go out as UTF-8.
 *
 * <h2>When Redis does not answer</h2>
 * Every call has a timeout (default 50 ms), and commands are refused at once while the connection is down
 * (the store's own connections, and Lettuce's in a Cluster, reconnect by themselves in the background). A call
 * that fails or times out is decided by the {@link FailurePolicy}: {@code OPEN} (the default) admits as if the key
 * were untouched, {@code CLOSED} rejects with {@code retry_after} = the wait until Redis is tried again. After a few
 * failures in a row a circuit breaker stops calling Redis for a while (default 3 failures, 1 s), so that during an
 * outage a decision costs microseconds instead of a timeout; then one call probes, and its success resumes
 * normal work without a restart. No failure of Redis ever throws into the request path; every one is counted
 * ({@link #counts()}).
 *
 * <h2>Rejections remembered</h2>
 * Once a key is rejected with {@code retry_after = x} on the server's clock, this process answers "rejected"
 * for that key and the same cost until {@code x} has passed, without calling Redis: nothing another
 * process does can make it admissible sooner (only {@code reset} could, and it is not on the request path).
 * On by default for fixed-window, gcra and token-bucket; such an answer carries the remembered
 * {@code remaining} and a {@code retry_after} and {@code reset_after} counted down on this host's clock. Only a
 * rejection whose {@code remaining} holds until its {@code retry_after} is remembered: one that leaves
 * {@code cost - 1}, as every rejection of cost 1 does, or one under a single fixed window
 * ({@link RejectionMemory#remember}).
 * Decisions with a time passed in are never answered from memory, so {@code simulate} sees every decision.
 * A key that this process gets admitted (at another cost) forgets its rejections: it was charged, so what they
 * said of it is no longer true. Another process charging it makes a remembered {@code retry_after} too short,
 * which the next rejection after it corrects.
 * At most {@link #MAX_REMEMBERED} rejections are remembered, under every rule together; a full memory is swept of
 * what has expired.
 *
 * <h2>Bounds</h2>
 * Lua's numbers are doubles, exact only up to 2^53, so the store refuses (with an error naming the limit)
 * what could pass that: a period that is not a whole number of milliseconds or is 2^53 ns (104.2 days) or longer,
 * {@code L × P} (in milliseconds) or {@code B × L} at 2^53 or more, {@code B × P / L} of 2^52 ns (52.1 days) or
 * more, a {@code max_delay} of 2^52 ns or more, and, for an interval refill, a {@code max_delay} that with
 * {@code ⌈B / L⌉} periods reaches 2^53 ns, or whose debt ({@code max_delay / P + 2} refills of {@code max(L, B)})
 * reaches 2^53. The script's header says how the arithmetic stays exact.
 */
public final class RedisStore implements Store, AutoCloseable {
    /** A Cluster's connections; null for a standalone Redis, which has {@link #scriptConnections}. */
    private final ClusterLanes cluster;
    /**
     * How many connections the callers share, each thread always the same one ({@link #lane}); on a standalone
     * Redis one more follows them, for the calls reading threads wait for.
     */
    private final int laneCount;

    /**
     * What a rule is decided with: its script and arguments, and, where calls of several decisions are sent
     * (gcra.lua on a standalone Redis), a batcher per connection.
     */
    private record Call(RuleScript script, Batcher[] batchers) {
    }

    private final ConcurrentHashMap<Rule, Call> calls = new ConcurrentHashMap<>();
    private final Breakers breakers;
    private final Outages outages;
    private final long timeoutNanos;
    /** Where every Redis key of this store begins: {@code sluice:}, or {@code sluice:<namespace>:}. */
    private final String keyHead;
    private final String uri;
    private volatile boolean closed;
    /**
     * On a standalone Redis, the store's connections, {@link #laneCount} of them, for every call
     * ({@link ScriptConnection} says why), then the waiting lane ({@link #lane}); empty in a Cluster.
     */
    private final List<ScriptConnection> scriptConnections;
    /**
     * Ends the calls sent alone that Redis does not answer in time, and watches the writes of
     * {@link #scriptConnections}; in a Cluster, Lettuce's commands.
     */
    private final Timer timer;
    /** The most decisions in one call of gcra.lua: 1 in a Cluster, where the keys of one call must share a slot. */
    private final int batchKeys;
    private final RejectionMemory rejections;
    /**
     * The most rules whose calls and remembered rejections are kept. A server reloading its configuration makes
     * new rules and never uses the old ones again; past this many, what is kept is dropped and made again as the
     * rules in use ask (a batcher with a call in flight finishes it on its own).
     */
    static final int MAX_RULES = 1_024;
    /** The most rejections remembered, under every rule together (about 240 bytes each). */
    static final int MAX_REMEMBERED = 100_000;

    /**
     * @param cluster a Cluster's connections, or null
     * @param own     a standalone Redis, which the store makes its own connections to; null for a Cluster
     * @throws RedisConnectionException if a connection of the store's own cannot be made (those made are closed)
     */
    private RedisStore(Builder settings, ClusterLanes cluster, ScriptConnection.Address own, Timer timer) {
        this.timer = timer;
        this.cluster = cluster;
        this.batchKeys = cluster != null ? 1 : settings.batchKeys;
        this.timeoutNanos = settings.timeout.toNanos();
        this.keyHead = settings.namespace == null ? "sluice:" : "sluice:" + settings.namespace + ":";
        this.uri = settings.uri;
        long openNanos = settings.breakerOpenFor.toNanos();
        this.breakers = cluster == null ? new Breakers(settings.breakerFailures, openNanos)
                : new Breakers(settings.breakerFailures, openNanos, cluster::partitions);
        this.outages = new Outages(settings.onFailure, settings.raiseFailures, timeoutNanos, shown(uri),
                cluster == null ? () -> { } : cluster::refreshTopology);
        this.rejections = new RejectionMemory(settings.rememberRejections, settings.mostRemembered, MAX_RULES);
        // made here, so that they are part of the store as any thread sees it (a review found them added after the
        // constructor, to a list another thread could see empty)
        List<ScriptConnection> made = new ArrayList<>();
        if (own != null) {
            try {
                ScriptConnection.Start start = settings.connectInBackground ? ScriptConnection.Start.TRY_NOW
                        : ScriptConnection.Start.NOW;
                for (int i = settings.connections + 1; i > 0; i--) { // the last: the waiting lane
                    ScriptConnection connection = new ScriptConnection(own, (int) RedisAddress.HANDSHAKE.toMillis(),
                            timeoutNanos, timer, outages::scriptReloaded, start);
                    made.add(connection);
                    if (start == ScriptConnection.Start.TRY_NOW && !connection.connected()) {
                        // Redis not reached: the others are made in the background at once, not after a handshake's
                        // timeout each (a review timed 18 s of build for eight connections to a silent address)
                        start = ScriptConnection.Start.BACKGROUND;
                    }
                }
            } catch (RuntimeException e) {
                made.forEach(ScriptConnection::close);
                throw e;
            }
        }
        this.scriptConnections = List.copyOf(made);
        this.laneCount = own != null ? made.size() - 1 : cluster.size();
    }

    /**
     * What went wrong so far, counted by decision: a failure is a decision whose call Redis did not answer (timeouts
     * included), so one batched call that failed counts each of its decisions (the breaker counts it once).
     */
    public record Counts(long failures, long timeouts, long failedOpen, long failedClosed, long shortCircuited,
                         long breakerOpenings, long scriptReloads, long localRejections) {
    }

    /**
     * False once the store is closed, and while a circuit breaker is open: Redis (in a Cluster, one of its masters)
     * failed several calls in a row and is not being asked. Never waits, and never stale for long when no decision
     * asks: each call may send a {@code PING} of its own (at most one a second to each Redis while its breaker is
     * closed, and as the probe of one open and due for a retry), whose answer a later call sees ({@link #ping}). Two
     * bugs found so: only a decision closed a breaker, so a quiet store called itself unhealthy long after Redis was
     * back; and only decisions opened one, so a quiet store called a dead Redis healthy.
     */
    public boolean healthy() {
        if (closed) {
            return false; // it asks Redis nothing more (it said true until pings failed: a review)
        }
        if (cluster == null) {
            boolean breakerClosed = breakers.closed((breaker, none) -> ping(breaker,
                    () -> scriptConnections.get(lane(false)).command("PING")));
            // and Redis reached once: a store made in the background before Redis was ever reached said healthy
            // until its pings had opened the breaker (a review); after, the breaker alone says it, as before
            return breakerClosed && scriptConnections.stream().anyMatch(ScriptConnection::everConnected);
        }
        return breakers.closed((breaker, node) -> ping(breaker, () -> cluster.ping(lane(false), node)));
    }

    /**
     * Sends {@code ping} for {@code watched}, if it is due: as the probe of an open breaker due for a retry, or as
     * the health check of a closed one not checked for a second. A failure counts in the breaker as a decision's
     * would, and may open it (an opening is counted; the failure is not, since {@link Counts#failures()} counts
     * decisions); a success closes an open breaker on trial ({@link CircuitBreaker#pinged}).
     */
    private void ping(CircuitBreaker watched, Supplier<CompletableFuture<String>> ping) {
        boolean probe = watched.isOpen();
        if (probe ? !watched.claimProbe() : !watched.healthCheckDue()) {
            return;
        }
        CompletableFuture<String> answer;
        try {
            answer = timed(ping.get());
        } catch (RuntimeException e) {
            answer = CompletableFuture.failedFuture(e);
        }
        answer.whenComplete((pong, failure) -> {
            if (failure == null) {
                watched.pinged(probe);
            } else if (watched.failed(failure)) {
                // in the breaker only: the failure and timeout counts are of decisions (a review found each health
                // check of a Redis that was down counted as a failed decision, one a second)
                outages.opened();
            }
        });
    }

    /** The node ids that have a breaker (for tests). */
    Set<String> breakerNodeIds() {
        return breakers.nodeIds();
    }

    /**
     * Decides by {@code policy} from now on what Redis does not answer. A server changes it without a new store,
     * so that it can change it while Redis is down, which is when it matters (a new store must reach Redis: a
     * server failing closed through an outage could not be switched to open, found by trying it).
     */
    public void onFailure(FailurePolicy policy) {
        if (policy == null) {
            throw new IllegalArgumentException("a failure policy is required: OPEN or CLOSED");
        }
        outages.policy(policy);
    }

    public Counts counts() {
        return outages.counts(rejections.recalled());
    }

    /** Connects with the defaults: 50 ms timeout, fail open, a breaker after 3 failures for 1 s. */
    public static RedisStore connect(String uri) {
        return builder(uri).build();
    }

    /** The settings of a connection to {@code uri} (see {@link #connect}). */
    public static Builder builder(String uri) {
        return new Builder(uri);
    }

    /**
     * Whether a piece of {@code uri}'s password could be read as a node or a name (a Cluster's password cut at a
     * comma, a Sentinel's with a {@code #}): such an address is refused ({@link #checkAddress}), and no part of it may
     * be quoted.
     */
    public static boolean passwordInDoubt(String uri) {
        return RedisAddress.passwordInDoubt(uri);
    }

    /**
     * Whether the address {@code uri} holds a password (a node's, in a Cluster's): one given apart from it
     * ({@link Builder#password}) would be a second.
     *
     * @throws IllegalArgumentException for a bad address, naming it, its password hidden
     */
    public static boolean hasPassword(String uri) {
        return hasPassword(RedisAddress.seeds(uri, RedisAddress.HANDSHAKE));
    }

    private static boolean hasPassword(List<RedisURI> seeds) {
        return seeds.stream().anyMatch(seed -> seed.getPassword() != null && seed.getPassword().length > 0);
    }

    /**
     * Connects to {@code redis://host:port[/db]} or to a Cluster, {@code redis-cluster://h1:p1,h2:p2}.
     *
     * @throws IllegalArgumentException for an address that is neither, naming it
     */
    private static RedisStore open(Builder settings) {
        String uri = settings.uri;
        // the addresses are read before anything is started, so a bad one leaves nothing running behind it
        List<RedisURI> seeds = RedisAddress.seeds(uri, settings.timeout);
        if (settings.password != null) {
            if (hasPassword(seeds)) {
                throw new IllegalArgumentException("bad Redis address \"" + RedisAddress.shown(uri) + "\": it has a"
                        + " password, and one is given apart from it; give it once");
            }
            seeds.forEach(seed -> seed.setPassword(settings.password.toCharArray()));
        }
        TlsTrust trust = seeds.get(0).isSsl() ? TlsTrust.of(settings.trust) : null;
        if (trust == null && settings.trust != null) {
            throw new IllegalArgumentException("certificates to trust (" + settings.trust + ") are for a TLS address,"
                    + " rediss://, rediss-cluster:// or rediss-sentinel://, got " + RedisAddress.shown(uri));
        }
        Timer timer = timer();
        ClusterLanes cluster = null;
        try {
            if (!RedisAddress.isCluster(uri)) {
                return new RedisStore(settings, null, standalone(seeds.get(0), trust), timer);
            }
            cluster = ClusterLanes.open(seeds, settings.timeout, trust, timer);
            return new RedisStore(settings, cluster, null, timer);
        } catch (RuntimeException | Error e) {
            // whatever failed, nothing started is left running (a review found the timer's thread, and a Cluster's
            // client, left behind by a failure after them)
            try {
                if (cluster != null) {
                    cluster.close();
                }
            } catch (RuntimeException | Error closing) {
                e.addSuppressed(closing);
            } finally {
                timer.stop();
            }
            throw e;
        }
    }

    /**
     * Where a standalone Redis is, for the store's own connections only ({@link ScriptConnection}), one per core and
     * at least two, as a Cluster has Lettuce connections; no Lettuce client, event loops or connections at all.
     */
    private static ScriptConnection.Address standalone(RedisURI seed, TlsTrust trust) {
        javax.net.ssl.SSLSocketFactory sockets = trust == null ? null : trust.sockets();
        Sentinels sentinels = !RedisAddress.isSentinel(seed) ? null : new Sentinels(seed.getSentinels().stream()
                .map(node -> java.net.InetSocketAddress.createUnresolved(node.getHost(), node.getPort())).toList(),
                seed.getSentinelMasterId(), seed.getUsername(),
                seed.getPassword() == null ? null : new String(seed.getPassword()), sockets);
        return new ScriptConnection.Address(seed.getHost(), seed.getPort(),
                seed.getUsername(), seed.getPassword() == null ? null : new String(seed.getPassword()),
                seed.getDatabase(), seed.getClientName(), sockets, sentinels);
    }

    /**
     * The timer that ends each call Redis does not answer in time (the calls sent alone, {@link #timed}; in a
     * Cluster Lettuce's commands, through {@link TimeoutOptions}) and watches the writes of the store's own
     * connections, on time and without waking while the store is idle ({@link DeadlineTimer}). Lettuce's own
     * ticks every 100 ms, so a call with a 50 ms timeout ended after 50 to 150 ms (a bug pinned in
     * RedisFailureTest); the batched gcra calls watch their own deadline.
     */
    private static Timer timer() {
        return new DeadlineTimer("sluice-redis-timeouts");
    }

    /**
     * Checks that {@code pem} holds certificates a TLS store can trust ({@link Builder#trust}).
     *
     * @throws IllegalArgumentException naming the file and what is wrong with it
     */
    public static void checkTrust(Path pem) {
        TlsTrust.of(pem);
    }

    /**
     * Checks {@code uri} as {@link #connect} reads it, without connecting: a configuration refuses a bad address
     * as it loads, not at every attempt to connect.
     *
     * @throws IllegalArgumentException naming the address, its password hidden
     */
    public static void checkAddress(String uri) {
        RedisAddress.seeds(uri, RedisAddress.HANDSHAKE);
    }

    /**
     * Checks that a store of {@code uri} can connect in the background ({@link Builder#connectInBackground}): a single
     * Redis or Sentinel can; a Cluster store learns its slots from a node as it is made.
     *
     * @throws IllegalArgumentException for a Cluster's address, saying why
     */
    public static void checkConnectInBackground(String uri) {
        if (RedisAddress.isCluster(uri)) {
            throw new IllegalArgumentException("background is for a single Redis or Sentinel: a Cluster store learns"
                    + " its slots from a node as it is made, got " + RedisAddress.shown(uri));
        }
    }

    /**
     * {@code uri} as it may be shown to anyone (messages, health checks, dashboards): a password in it
     * ({@code redis://:secret@host}, {@code redis://user:secret@host}, Lettuce's {@code redis://secret@host}) is
     * written {@code ****}. Everything before the last {@code @} is credentials: a host, port or database has none.
     */
    public static String shown(String uri) {
        return RedisAddress.shown(uri);
    }

    /**
     * Whether the address {@code uri} is reached over TLS: {@code rediss://}, {@code rediss-cluster://},
     * {@code rediss-sentinel://}.
     */
    public static boolean speaksTls(String uri) {
        return RedisAddress.isTls(uri);
    }

    /**
     * The calling thread's connection, by its index: always the same one, so one thread's commands stay in order.
     *
     * <p>But a caller's continuation runs on a reading thread, and one that {@code waits} for its answer (a
     * decision or a reset made there) must never wait for a thread that may be waiting too. Its own connection's
     * is itself (a bug a review found: such a reset waited out the timeout, and held up every call of that
     * connection meanwhile); another connection's may be waiting for its own (a bug the next review found: two
     * reading threads, each in a continuation that decides, waited for each other until both timed out, and
     * their failures opened the breaker). So every reading thread, of any store, that waits sends on the waiting
     * lane, the connection after the others: its reading thread runs no caller's continuation, since only the
     * callers that wait send on it, and only hands them their answers. A continuation that does not wait sends
     * on any connection but its own thread's, as other callers do.
     */
    private int lane(boolean waits) {
        Thread caller = Thread.currentThread();
        int lane = (int) (caller.getId() % laneCount);
        if (!scriptConnections.isEmpty() && ScriptConnection.reads(caller)) {
            if (waits) {
                return laneCount;
            }
            if (scriptConnections.get(lane).reader() == caller) {
                return (lane + 1) % laneCount; // laneCount is at least 2 on a standalone Redis
            }
        }
        return lane;
    }

    /** The Redis key that holds the state of {@code key} in a store of no namespace. */
    static String redisKey(String key) {
        return redisKey("sluice:", key);
    }

    /**
     * The Redis key that holds the state of {@code key}: {@code <head>{<key>}}, whose hash tag is the key. Redis
     * takes a tag from the first '{' to the first '}' after it, so a key with a '}' of its own would be tagged
     * with what comes before that '}' only, and every key of one such beginning ({@code tenant}user-1},
     * {@code tenant}user-2}...) would go to one slot (found by a review); such a key is written
     * {@code <head>{}<key>}, whose tag is empty, and Redis hashes the whole name. No key is written both ways: a
     * name of the first kind has no '}' right after its '{'.
     */
    private static String redisKey(String head, String key) {
        return key.indexOf('}') < 0 ? head + "{" + key + "}" : head + "{}" + key;
    }

    /**
     * The Redis key of {@code key} in this store. Every call on a key starts here, so a closed store says so here:
     * its connections are gone, and a decision would otherwise be the failure policy's (a review found limiters
     * admitting everything after {@link #close}).
     *
     * @throws IllegalStateException once the store is closed
     */
    private String keyOf(String key) {
        if (closed) {
            throw new IllegalStateException("the Redis store " + shown(uri) + " is closed");
        }
        return redisKey(keyHead, check(key));
    }

    /**
     * Waits for Redis's answer and decides with it on the calling thread: the connection's event loop only
     * hands the answer over, so its time goes to Redis's replies, not to parsing them. Every call is bounded
     * by the timeout, so this never hangs, unless the thread that reads the answers is itself held: by an
     * asynchronous decision's continuation that blocks there (see {@code RateLimiter#tryAcquireAsync}).
     */
    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        Asking asking = asking(rule, key, cost, nowNanos);
        Decision local = answeredHere(rule, key, cost, nowNanos, asking.breaker());
        if (local != null) {
            return local;
        }
        long resetsBefore = rejections.resets();
        long sent = System.nanoTime();
        String answer;
        try {
            answer = send(asking.call(), asking.redisKey(), cost, nowNanos, true).join();
        } catch (CompletionException e) {
            return failed(e.getCause(), rule, cost, nowNanos, asking.breaker());
        }
        return answered(rule, key, cost, nowNanos, answer, asking.breaker(), resetsBefore, sent);
    }

    /** As {@link #decide}, with every failure, a bad argument's included, in the stage returned. */
    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, long nowNanos) {
        Asking asking;
        CompletableFuture<String> answer;
        long resetsBefore;
        long sent;
        try {
            asking = asking(rule, key, cost, nowNanos);
            Decision local = answeredHere(rule, key, cost, nowNanos, asking.breaker());
            if (local != null) {
                return CompletableFuture.completedFuture(local);
            }
            resetsBefore = rejections.resets();
            sent = System.nanoTime();
            answer = send(asking.call(), asking.redisKey(), cost, nowNanos, false);
        } catch (RuntimeException e) { // a bad argument; a closed store, even as it sends; raiseFailures, breaker open
            return CompletableFuture.failedFuture(e);
        }
        return answer.handle((reply, failure) -> failure == null
                ? answered(rule, key, cost, nowNanos, reply, asking.breaker(), resetsBefore, sent)
                : failed(failure, rule, cost, nowNanos, asking.breaker()));
    }

    /** What a decision asks Redis with: the Redis key, the rule's call, and the breaker that watches that Redis. */
    private record Asking(String redisKey, Call call, CircuitBreaker breaker) {
    }

    /**
     * The arguments of a decision, checked, and what it asks Redis with.
     *
     * @throws IllegalArgumentException for a bad key, cost or time, or a rule Redis cannot decide exactly
     * @throws IllegalStateException once the store is closed
     */
    private Asking asking(Rule rule, String key, long cost, long nowNanos) {
        String redisKey = keyOf(key);
        Call call = call(rule);
        checkCostAndTime(cost, nowNanos);
        return new Asking(redisKey, call, breakers.of(redisKey));
    }

    /**
     * The decision this process makes without Redis (a rejection remembered, the breaker open), or null.
     *
     * @throws StoreUnavailableException with the breaker open, for a tool that asked for failures
     */
    private Decision answeredHere(Rule rule, String key, long cost, long nowNanos, CircuitBreaker breaker) {
        Decision remembered = rejections.recall(rule, key, cost, nowNanos);
        if (remembered != null) {
            return remembered;
        }
        return breaker.allows() ? null : outages.shortCircuited(rule, cost, nowNanos, breaker);
    }

    /**
     * Asks Redis: with the decisions waiting on the caller's connection (gcra.lua, standalone), or alone. The
     * caller {@code waits} for the answer, or goes on (see {@link #lane}).
     */
    private CompletableFuture<String> send(Call call, String redisKey, long cost, long nowNanos, boolean waits) {
        int lane = lane(waits);
        if (call.batchers() != null) {
            return call.batchers()[lane].submit(redisKey, RuleScript.gcraArgument(cost, nowNanos));
        }
        String[] keys = {redisKey};
        RuleScript.Script script = call.script().script();
        String[] arguments = call.script().arguments(cost, nowNanos);
        if (!scriptConnections.isEmpty()) {
            return timed(scriptConnections.get(lane).evaluate(script.sha(), script.text(), keys,
                    arguments));
        }
        // A Cluster, on Lettuce. A node's connection is made as its first command goes out, and that command's
        // timeout runs only once it is connected: to a node that accepts but does not answer, the handshake's 2 s
        // (a bug pinned in RedisClusterFailoverTest: a decision took 1.6 s). So the call is bounded here too.
        return timed(cluster.evaluate(lane, script, keys, arguments, outages::scriptReloaded));
    }

    /**
     * {@code answer}, failed with {@link RedisCommandTimeoutException} if Redis has not answered within the
     * timeout, as Lettuce fails its commands (on the same timer, which sleeps while nothing is pending). The call
     * stays in its connection's line; its late answer is dropped. Every call sent alone is bounded so, on the
     * store's own connections and in a Cluster (where it replaced {@code orTimeout}, whose failure carried no
     * message and whose scheduler woke for each call made while none was pending).
     */
    private CompletableFuture<String> timed(CompletableFuture<String> answer) {
        if (answer.isDone()) {
            return answer; // refused at once: the connection is down
        }
        // failed on another thread than the timer's: a caller's continuation that blocked there would hold up every
        // later timeout (Lettuce, too, hands its timeouts over)
        io.netty.util.Timeout deadline = timer.newTimeout(expired -> Batcher.TIMED_OUT.execute(
                () -> answer.completeExceptionally(new RedisCommandTimeoutException("Command timed out after "
                        + dev.sluice.DurationFormat.format(timeoutNanos)))), timeoutNanos, TimeUnit.NANOSECONDS);
        answer.whenComplete((reply, failure) -> deadline.cancel());
        return answer;
    }

    /**
     * The decision Redis answered. An answer that is not one (a script of another version under the same key
     * prefix, say) is a failure of the store, decided by the failure policy like any other: it never reaches
     * the caller as an exception of the parser.
     */
    private Decision answered(Rule rule, String key, long cost, long nowNanos, String answer, CircuitBreaker breaker,
                              long resetsBefore, long sent) {
        Decision decision;
        try {
            decision = ScriptReplies.decision(rule, answer);
        } catch (RuntimeException e) {
            return failed(new IllegalStateException("a Sluice script answered \"" + ScriptReplies.printable(String.valueOf(answer))
                    + "\": " + e.getMessage(), e), rule, cost, nowNanos, breaker);
        }
        outages.succeeded(breaker);
        return rejections.remember(rule, key, cost, nowNanos, decision, resetsBefore, sent);
    }

    /** Counts a call Redis did not answer, and decides it by the failure policy. */
    private Decision failed(Throwable failure, Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        while (failure instanceof CompletionException && failure.getCause() != null) {
            failure = failure.getCause();
        }
        if (closed) { // its connection closed under it: not Redis failing, and no decision (fail-open admitted it)
            throw new IllegalStateException("the Redis store " + shown(uri) + " was closed before Redis answered",
                    failure);
        }
        return outages.failed(failure, rule, cost, nowNanos, breaker);
    }

    private static String check(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        for (int i = 0; i < key.length(); i++) {
            char c = key.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < key.length() && Character.isLowSurrogate(key.charAt(i + 1))) {
                i++; // a pair: one code point
            } else if (Character.isSurrogate(c)) {
                // UTF-8 has no bytes for it: Java writes '?', so "user" and a lone surrogate counted as "user?" (a review
                // found it)
                throw new IllegalArgumentException("key \"" + key.replaceAll("\\p{Cs}", "\uFFFD") + "\" holds a lone"
                        + " surrogate at char " + i + ": a Redis key is UTF-8, which has no bytes for it");
            }
        }
        return key;
    }

    private Call call(Rule rule) {
        Call call = calls.get(rule);
        if (call != null) {
            return call;
        }
        Call made = callOf(rule); // a rule refused here clears nothing
        if (calls.size() >= MAX_RULES) {
            calls.clear();
        }
        Call first = calls.putIfAbsent(rule, made);
        return first != null ? first : made;
    }

    /** The store's own connections that callers share (a standalone Redis), for tests: not the waiting lane. */
    List<ScriptConnection> connections() {
        return scriptConnections.isEmpty() ? List.of() : scriptConnections.subList(0, laneCount);
    }

    /** The number of rules whose calls are kept (at most {@link #MAX_RULES}). */
    int rulesKept() {
        return Math.max(calls.size(), rejections.rules());
    }

    /** The script for {@code rule}, and the batchers of its decisions if they may share calls (see the class comment). */
    private Call callOf(Rule rule) {
        RuleScript script = RuleScript.of(rule); // checks every bound, whichever script decides
        if (!script.batchable() || batchKeys <= 1) {
            return new Call(script, null);
        }
        Batcher[] batchers = new Batcher[scriptConnections.size()]; // the waiting lane's too
        for (int i = 0; i < batchers.length; i++) {
            ScriptConnection connection = scriptConnections.get(i);
            batchers[i] = new Batcher(script.fixed(), (keys, arguments) -> connection.evaluate(RuleScript.GCRA.sha(),
                    RuleScript.GCRA.text(), keys, arguments), ScriptReplies::gcraAnswers, batchKeys, timeoutNanos,
                    connection);
        }
        return new Call(script, batchers);
    }

    private static void checkCostAndTime(long cost, long nowNanos) {
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be a whole number >= 0, got " + cost);
        }
        if (nowNanos != STORE_CLOCK && (nowNanos < 0 || nowNanos > Rule.MAX_TIME_NANOS)) {
            throw new IllegalArgumentException("time must be between 0 and " + Rule.MAX_TIME_NANOS
                    + "ns since the epoch, got " + nowNanos + "ns");
        }
    }

    /**
     * Checks that a Redis store can decide {@code rule} exactly, before anything is decided, and before any
     * store is connected to.
     *
     * @throws IllegalArgumentException naming the limit (or max delay) beyond Lua's exact range
     */
    public static void checkExact(Rule rule) {
        RuleScript.checkExact(rule);
    }

    @Override
    public void check(Rule rule) {
        checkExact(rule);
    }

    @Override
    public void reset(Rule rule, String key) {
        String redisKey = keyOf(key);
        // counted before and after the DEL: a call sent before the DEL's answer remembers no rejection
        // (RejectionMemory)
        rejections.resetting(key);
        try {
            if (cluster == null) {
                timed(scriptConnections.get(lane(true)).command("DEL", redisKey)).join();
            } else {
                cluster.delete(lane(false), redisKey);
            }
        } catch (CompletionException e) { // on the store's own connections: what Redis did, as Lettuce throws it
            RuntimeException cause = e.getCause() instanceof RuntimeException failure ? failure : e;
            outages.counted(cause, breakers.of(redisKey));
            throw Outages.unavailable(cause);
        } catch (RuntimeException e) { // a timeout, a connection lost: counted as any call Redis did not answer
            outages.counted(e, breakers.of(redisKey));
            throw Outages.unavailable(e);
        } finally {
            rejections.resetting(key); // what a call answered between the two counts remembered
        }
    }

    /**
     * Makes one real decision of each script on a key of its own, then removes it, past the failure policy: so that
     * a store that answers {@code PING} but can decide nothing is found before it is used. A review started a server
     * on a Redis user without {@code EVALSHA}, on a user whose keys could not be {@code sluice:*}, and on a replica
     * (its scripts' writes refused, {@code READONLY}): each started, said it was healthy, and admitted every request
     * uncounted by its failure policy. Its decisions are not counted in {@link #counts()} nor in the breaker.
     *
     * @throws StoreUnavailableException with Redis's own answer ({@code NOPERM ...}, {@code READONLY ...}) or the
     *                                   timeout that ended the call
     */
    public void probe() {
        String probe = "sluice-probe-" + java.util.UUID.randomUUID();
        for (Rule rule : List.of(PROBE_GCRA, PROBE_WINDOW)) { // gcra.lua, then decide.lua, each on a key of its own
            String key = probe + "-" + rule.algorithm().label();
            String redisKey = keyOf(key);
            try {
                send(call(rule), redisKey, 1, STORE_CLOCK, true).join();
            } catch (CompletionException e) {
                Throwable cause = e.getCause() == null ? e : e.getCause();
                throw new StoreUnavailableException("cannot decide: " + cause.getMessage(), cause);
            }
            try {
                reset(rule, key);
            } catch (RuntimeException e) {
                // the key expires within seconds by itself
            }
        }
    }

    private static final Rule PROBE_GCRA = Rule.of(dev.sluice.Algorithm.GCRA, List.of(dev.sluice.Limit.parse("1/1s")));
    private static final Rule PROBE_WINDOW = Rule.of(dev.sluice.Algorithm.FIXED_WINDOW,
            List.of(dev.sluice.Limit.parse("1/1s"), dev.sluice.Limit.parse("2/2s")));

    /** 2^52 ns (about 52.1 days), less one: the longest max delay the scripts keep exact. */
    @Override
    public long longestDelayNanos() {
        return RuleScript.LONGEST_DELAY_NANOS;
    }

    /** Less for an interval refill of long periods: its refills and the delay stay below 2^53 ns together. */
    @Override
    public long longestDelayNanos(Rule rule) {
        return RuleScript.longestDelayNanos(rule);
    }

    @Override
    public void close() { // no checked exception: a try-with-resources needs no catch (a review found it did)
        closed = true;
        for (ScriptConnection connection : scriptConnections) {
            connection.close();
        }
        try {
            if (cluster != null) {
                cluster.close();
            }
        } finally {
            timer.stop(); // the store made it, for either kind
        }
    }

    @Override
    public String toString() {
        return "RedisStore(" + RuleScript.DECIDE.sha() + ", " + RuleScript.GCRA.sha() + ")";
    }

    /** How a {@link RedisStore} connects and what it does when Redis does not answer. */
    public static final class Builder {
        private final String uri;
        private Duration timeout = Duration.ofMillis(50);
        private FailurePolicy onFailure = FailurePolicy.OPEN;
        private int breakerFailures = 3;
        private Duration breakerOpenFor = Duration.ofSeconds(1);
        private boolean rememberRejections = true;
        private int mostRemembered = MAX_REMEMBERED;
        private boolean raiseFailures;
        private int batchKeys = 64;
        private int connections = Math.max(2, Runtime.getRuntime().availableProcessors());
        private String namespace;
        private Path trust;
        private boolean connectInBackground;
        private String password;

        private Builder(String uri) {
            this.uri = uri;
        }

        /** How long a decision waits for Redis (default 50 ms; at most a day). */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.isNegative() || timeout.isZero() || timeout.compareTo(Duration.ofDays(1)) > 0) {
                throw new IllegalArgumentException("timeout must be > 0 and at most a day, got " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /** What a decision Redis did not answer becomes (default {@link FailurePolicy#OPEN}). */
        public Builder onFailure(FailurePolicy policy) {
            if (policy == null) {
                throw new IllegalArgumentException("a failure policy is required: OPEN or CLOSED");
            }
            this.onFailure = policy;
            return this;
        }

        /** After {@code failures} failures in a row, stop calling Redis for {@code openFor} (default 3, 1 s). */
        public Builder breaker(int failures, Duration openFor) {
            if (failures < 1 || openFor == null || openFor.isNegative() || openFor.isZero()
                    || openFor.compareTo(Duration.ofDays(1)) > 0) {
                throw new IllegalArgumentException("the breaker needs failures >= 1 and a time > 0 and at most a day,"
                        + " got " + failures
                        + " and " + openFor);
            }
            this.breakerFailures = failures;
            this.breakerOpenFor = openFor;
            return this;
        }

        /** Whether rejections are remembered until their {@code retry_after} (default on; see the class comment). */
        public Builder rememberRejections(boolean remember) {
            this.rememberRejections = remember;
            return this;
        }

        /** The most rejections remembered, under every rule together (default {@link #MAX_REMEMBERED}; tests make it small). */
        Builder rememberAtMost(int rejections) {
            this.mostRemembered = rejections;
            return this;
        }

        /**
         * Throw {@link StoreUnavailableException} when Redis does not answer, instead of deciding by the failure
         * policy (default off): for tools whose every decision must come from Redis, never for a request path.
         */
        public Builder raiseFailures(boolean raise) {
            this.raiseFailures = raise;
            return this;
        }

        /**
         * The most decisions of one gcra rule (gcra, greedy token-bucket, leaky-bucket) that are sent to a
         * standalone Redis in one call (default 64; 1 sends each alone). A decision never waits for others:
         * those that arrive while a call is in flight on their connection leave together when it is answered.
         * In a Cluster every call carries one key.
         */
        public Builder batch(int maxKeys) {
            if (maxKeys < 1) {
                throw new IllegalArgumentException("a batch holds at least 1 decision, got " + maxKeys);
            }
            this.batchKeys = maxKeys;
            return this;
        }

        /**
         * How many connections a store makes to a standalone Redis (default one per core, and at least two; a
         * Cluster's follow Lettuce's event loops). Each has a thread that reads it, and the callers spread over
         * them by thread; measured on two cores, one connection or two decided as fast, four or eight slower
         * (bench/README.md). At least two, so that a caller's continuation, which runs on the thread reading one
         * connection, always has another to send on; at most 256. One more is made, for the decisions and resets
         * that such continuations wait for, so that no two reading threads ever wait for each other.
         */
        public Builder connections(int count) {
            if (count < 2 || count > 256) {
                throw new IllegalArgumentException("a store makes 2 to 256 connections to Redis, got " + count);
            }
            this.connections = count;
            return this;
        }

        /**
         * Keeps this store's keys apart from every other store's on the same Redis: they are written
         * {@code sluice:<namespace>:{<key>}} instead of {@code sluice:{<key>}}. A Redis keeps one state per key,
         * read as the state of whatever rule decides it, so two limiters of different rules that share a Redis and
         * key names need a namespace each (or keys of their own): a login limiter of 2 a minute and a search
         * limiter of 100 a minute on the key {@code user-1} otherwise count one another's requests. Default none.
         *
         * @throws IllegalArgumentException for an empty namespace, or one with a brace, a space, a control
         *                                  character or half a surrogate pair, or longer than 200 characters, naming it
         */
        public Builder namespace(String namespace) {
            if (namespace == null || namespace.isEmpty() || namespace.length() > 200
                    || namespace.chars().anyMatch(c -> c == '{' || c == '}' || Character.isWhitespace(c)
                    || Character.isISOControl(c))
                    // a lone surrogate goes out as '?' in UTF-8, so "a\uD800" and "a?" were one namespace (a review)
                    || !namespace.equals(new String(namespace.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                    java.nio.charset.StandardCharsets.UTF_8))) {
                throw new IllegalArgumentException("a namespace is 1 to 200 characters, none of them a brace, a space,"
                        + " a control character or half a surrogate pair, got " + (namespace == null ? "null"
                        : "\"" + ScriptReplies.printable(namespace) + "\""));
            }
            this.namespace = namespace;
            return this;
        }

        /**
         * The certificates (a PEM file: a CA's, or a self-signed server's own) that a {@code rediss://},
         * {@code rediss-cluster://} or {@code rediss-sentinel://} server's certificate (a sentinel's too) must be, or
         * be signed by; its name (or IP address) must be the host of the address (or the one the sentinels name). Default: the JVM's trust store, which trusts the public CAs of managed Redis
         * services.
         */
        public Builder trust(Path certificates) {
            if (certificates == null) {
                throw new IllegalArgumentException("certificates to trust: a PEM file is required, got null");
            }
            this.trust = certificates;
            return this;
        }

        /**
         * Whether {@link #build} may make the store while Redis cannot be reached (default off: it throws). On, the
         * store's connections are made in the background, again and again as a connection lost is, and until one is
         * made each decision is its failure policy's, at once, and counted as any failure, so that an application
         * starts while Redis is down, as it goes on when Redis goes down later (a review found a Spring application
         * on fail-open Redis that could not start during an outage, and so restarted over and over). For a single
         * Redis and for Sentinel; a Cluster store must reach one of its nodes to learn its slots.
         */
        public Builder connectInBackground(boolean inBackground) {
            this.connectInBackground = inBackground;
            return this;
        }

        /**
         * The password, given apart from the address: read from a secret (a file Kubernetes mounts, an environment
         * variable) rather than written in the address, and needing no percent-encoding. It is the address's user's
         * ({@code redis://user:@host}; without one, the default user's), given to every node of a Cluster and to the
         * sentinels as the address's own would be. An address with a password of its own is refused: one of the
         * two would be ignored.
         */
        public Builder password(String password) {
            if (password == null || password.isEmpty()) {
                throw new IllegalArgumentException("a password given apart from the address cannot be empty");
            }
            this.password = password;
            return this;
        }

        /**
         * Connects.
         *
         * @throws IllegalArgumentException for an address that is not redis:// or redis-cluster://, naming it, or a
         *                                  Cluster's with {@link #connectInBackground}, or with a password of its own
         *                                  and one given apart
         * @throws io.lettuce.core.RedisConnectionException when Redis cannot be reached at all (and the connections
         *                                  are not made in the background)
         */
        public RedisStore build() {
            if (connectInBackground) {
                checkConnectInBackground(uri);
            }
            return open(this);
        }
    }
}
