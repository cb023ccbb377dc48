package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.Refill;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.FailurePolicy;
import dev.sluice.store.Store;
import dev.sluice.store.StoreUnavailableException;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.api.sync.RedisKeyCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.Partitions;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.NettyCustomizer;
import io.netty.channel.Channel;
import io.netty.handler.flush.FlushConsolidationHandler;
import io.netty.util.Timer;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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
 * The state of a key lives at {@code sluice:{<key>}}: the braces are a Cluster hash tag, so every limit of a
 * key is in one slot (in one string, in fact) and the script touches one slot.
 *
 * <h2>Connections</h2>
 * On a standalone Redis the store has connections of its own, one per core and at least two unless
 * {@link Builder#connections} says otherwise ({@link ScriptConnection}): a plain socket written by the caller and
 * read by one thread, with fewer hand-overs between threads than Lettuce's event loop (measured: 16 callers a
 * fifth to a third more decisions a second, 64 half again; bench/README.md). Each calling thread always uses the
 * same one. They carry every decision's call and every reset; a standalone store starts no Lettuce client, event
 * loop or connection.
 *
 * <p>In a Cluster the store uses Lettuce, which follows the slots and the failovers: one connection per I/O thread
 * of the client (as many as the machine has cores, at least two), each flushing the commands of its callers
 * together, once per turn of its event loop, so Redis reads them as from a pipeline; with one connection only, its
 * event loop and Redis took turns, each idle while the other worked (measured: bench/README.md).
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
 * {@code remaining} and a {@code retry_after} and {@code reset_after} counted down on this host's clock.
 * Decisions with a time passed in are never answered from memory, so {@code simulate} sees every decision.
 * A key that this process gets admitted (at another cost) forgets its rejections: it was charged, so what they
 * said of it is no longer true. Another process charging it makes a remembered {@code retry_after} too short,
 * which the next rejection after it corrects.
 * At most {@link #MAX_REMEMBERED} keys a rule are remembered; a full memory is swept of what has expired.
 *
 * <h2>Bounds</h2>
 * Lua's numbers are doubles, exact only up to 2^53, so the store refuses (with an error naming the limit)
 * what could pass that: a period that is not a whole number of milliseconds or is 104 days or longer,
 * {@code L × P} (in milliseconds) or {@code B × L} at 2^53 or more, {@code B × P / L} of 2^52 ns (52 days) or
 * more, and a {@code max_delay} of 52 days or more. The script's header says how the arithmetic stays exact.
 */
public final class RedisStore implements Store, AutoCloseable {
    private static final long NS = 1_000_000L;
    private static final long EXACT = 1L << 53;
    private static final long HALF_EXACT = 1L << 52;
    /** With a time passed in, Redis's own clock says nothing of when a key is untouched: keep keys an hour more. */
    private static final long EXPLICIT_TIME_TTL_MARGIN_MS = 3_600_000L;

    private final AutoCloseable client;
    /** In a Cluster, the Lettuce connections; empty on a standalone Redis, which has {@link #scriptConnections}. */
    private final List<Lane> lanes;
    /** How many connections the callers share, each thread always the same one ({@link #lane}). */
    private final int laneCount;

    /** One Lettuce connection to a Redis Cluster and its commands. */
    private record Lane(StatefulRedisClusterConnection<String, String> connection,
                        RedisScriptingAsyncCommands<String, String> scriptingAsync,
                        RedisKeyCommands<String, String> keys) {
        static Lane of(StatefulRedisClusterConnection<String, String> connection) {
            return new Lane(connection, connection.async(), connection.sync());
        }
    }
    /** A script as sent: its text (for EVAL after a NOSCRIPT) and its SHA-1 (for EVALSHA). */
    private record Script(String text, String sha) {
        static Script load(String name) {
            String text;
            try (InputStream in = RedisStore.class.getResourceAsStream(name)) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException | NullPointerException e) {
                throw new IllegalStateException(name + " is missing from sluice-redis", e);
            }
            return new Script(text, sha1(text));
        }
    }

    /**
     * What a rule is decided with: a script, its arguments that depend on the rule only, and, where calls of
     * several decisions are sent (gcra.lua on a standalone Redis), a batcher per connection.
     */
    private record Call(Script script, String[] fixed, Batcher[] batchers) {
        /**
         * The arguments of one decision's call at {@code nowNanos} ({@link #STORE_CLOCK}: the server's): gcra.lua
         * takes the decision's own last, decide.lua first.
         */
        String[] arguments(long cost, long nowNanos) {
            if (script == GCRA) {
                String[] arguments = Arrays.copyOf(fixed, fixed.length + 1);
                arguments[fixed.length] = gcraArgument(cost, nowNanos);
                return arguments;
            }
            boolean serverClock = nowNanos == STORE_CLOCK;
            String[] arguments = fixed.clone();
            arguments[0] = serverClock ? "" : Long.toString(nowNanos / NS);
            arguments[1] = serverClock ? "" : Long.toString(nowNanos % NS);
            arguments[2] = Long.toString(cost);
            arguments[5] = serverClock ? "0" : Long.toString(EXPLICIT_TIME_TTL_MARGIN_MS);
            return arguments;
        }
    }

    /**
     * gcra.lua's one argument for a decision: its cost alone at the server's clock, or {@code "cost ms ns"} at
     * a time passed in. One argument, not three, is less for Redis to parse (the script says how much).
     */
    static String gcraArgument(long cost, long nowNanos) {
        return nowNanos == STORE_CLOCK ? Long.toString(cost)
                : cost + " " + nowNanos / NS + " " + nowNanos % NS;
    }

    /** Every rule: one limit or several, any algorithm. */
    private static final Script DECIDE = Script.load("decide.lua");
    /** The common case, for less work in Redis: one gcra limit (gcra, greedy token-bucket, leaky-bucket). */
    private static final Script GCRA = Script.load("gcra.lua");
    private final ConcurrentHashMap<Rule, Call> calls = new ConcurrentHashMap<>();
    /** Changed while deciding by {@link #onFailure(FailurePolicy)}. */
    private volatile FailurePolicy onFailure;
    /** The breaker of a standalone Redis; in a Cluster, of a node whose place is not known yet. */
    private final CircuitBreaker breaker;
    /**
     * In a Cluster, each master's breaker, by node id, made as the node is first asked: a master that hangs opens
     * its own, and the others keep deciding (a bug pinned in RedisClusterFailoverTest: one breaker for every node
     * never opened while the others answered, and once open it decided every node's keys by the policy). A
     * failover moves the slots to another id, whose breaker starts closed; the old id's breaker goes as the new
     * id is first asked. Null for a standalone Redis.
     */
    private final ConcurrentHashMap<String, CircuitBreaker> nodeBreakers;
    /** The Cluster's slots and their masters, as the client last refreshed them; null for a standalone Redis. */
    private final Supplier<Partitions> partitions;
    private final long timeoutNanos;
    /**
     * On a standalone Redis, the store's connections, {@link #laneCount} of them, for every call
     * ({@link ScriptConnection} says why); empty in a Cluster.
     */
    private final List<ScriptConnection> scriptConnections;
    /**
     * Ends the calls sent alone that Redis does not answer in time, and watches the writes of
     * {@link #scriptConnections}; in a Cluster, Lettuce's commands.
     */
    private final Timer timer;
    private final LongAdder failures = new LongAdder();
    private final LongAdder timeouts = new LongAdder();
    private final LongAdder failedOpen = new LongAdder();
    private final LongAdder failedClosed = new LongAdder();
    private final LongAdder shortCircuited = new LongAdder();
    private final LongAdder breakerOpenings = new LongAdder();
    private final LongAdder scriptReloads = new LongAdder();
    private final LongAdder localRejections = new LongAdder();
    private final boolean rememberRejections;
    private final boolean raiseFailures;
    /** The most decisions in one call of gcra.lua: 1 in a Cluster, where the keys of one call must share a slot. */
    private final int batchKeys;
    private final ConcurrentHashMap<Rule, Memory> rejections = new ConcurrentHashMap<>();
    /** Counts up as each reset begins and as it ends: a call that saw it move remembers no rejection. */
    private final AtomicLong resets = new AtomicLong();
    /** The most rejections remembered under one rule. */
    static final int MAX_REMEMBERED = 100_000;
    private final int mostRemembered;
    /**
     * The most rules whose calls and remembered rejections are kept. A server reloading its configuration makes
     * new rules and never uses the old ones again; past this many, what is kept is dropped and made again as the
     * rules in use ask (a batcher with a call in flight finishes it on its own).
     */
    static final int MAX_RULES = 1_024;

    /** A rejection remembered: of {@code cost} or more, until {@code until} on {@link System#nanoTime()}. */
    private record Rejection(long cost, long until, long at, Decision decision) {
    }

    /**
     * The rejections remembered under one rule, by key. An expired one is dropped when its key asks again, or by
     * a sweep of the memory once it is full: keys that come and go (an address per request, say) filled it with
     * expired ones, and it stopped remembering for good (a bug a review found).
     */
    private record Memory(ConcurrentHashMap<String, Rejection> byKey, AtomicLong nextSweep) {
        Memory() {
            this(new ConcurrentHashMap<>(), new AtomicLong(System.nanoTime()));
        }

        /**
         * Drops the expired rejections, if one may have expired since the last sweep: a sweep reads every entry,
         * so it waits for the earliest expiry it left, and comes at most ten times a second.
         */
        void sweep(long now) {
            long due = nextSweep.get();
            if (now - due < 0 || !nextSweep.compareAndSet(due, now + SWEEP_NANOS)) {
                return;
            }
            long earliest = Long.MAX_VALUE;
            for (Map.Entry<String, Rejection> entry : byKey.entrySet()) {
                Rejection rejection = entry.getValue();
                if (now - rejection.until >= 0) {
                    byKey.remove(entry.getKey(), rejection);
                } else if (rejection.until - now < earliest) {
                    earliest = rejection.until - now;
                }
            }
            nextSweep.set(now + Math.max(SWEEP_NANOS, earliest == Long.MAX_VALUE ? 0 : earliest));
        }

        /**
         * Brings the next sweep forward to {@code when} if it was later: a rejection remembered after a sweep may
         * expire before those the sweep left (a review found a full memory waiting out the longest of them).
         */
        void dueBy(long when) {
            nextSweep.accumulateAndGet(when, (due, earlier) -> earlier - due < 0 ? earlier : due);
        }
    }

    /** The least time between two sweeps of one rule's rejections. */
    private static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    /**
     * @param lanes    a Cluster's Lettuce connections, or none
     * @param own      a standalone Redis, which the store makes its own connections to; null for a Cluster
     * @throws RedisConnectionException if a connection of the store's own cannot be made (those made are closed)
     */
    private RedisStore(Builder settings, AutoCloseable client, List<Lane> lanes, ScriptConnection.Address own,
                       Supplier<Partitions> partitions, Timer timer) {
        this.timer = timer;
        boolean cluster = partitions != null;
        this.partitions = partitions;
        this.nodeBreakers = cluster ? new ConcurrentHashMap<>() : null;
        this.client = client;
        this.batchKeys = cluster ? 1 : settings.batchKeys;
        this.lanes = List.copyOf(lanes);
        this.onFailure = settings.onFailure;
        this.timeoutNanos = settings.timeout.toNanos();
        this.breaker = new CircuitBreaker(settings.breakerFailures, settings.breakerOpenFor.toNanos());
        this.rememberRejections = settings.rememberRejections;
        this.mostRemembered = settings.mostRemembered;
        this.raiseFailures = settings.raiseFailures;
        // made here, so that they are part of the store as any thread sees it (a review found them added after the
        // constructor, to a list another thread could see empty)
        List<ScriptConnection> made = new ArrayList<>();
        if (own != null) {
            try {
                for (int i = settings.connections; i > 0; i--) {
                    made.add(new ScriptConnection(own, (int) HANDSHAKE.toMillis(), timeoutNanos, timer,
                            scriptReloads::increment));
                }
            } catch (RuntimeException e) {
                made.forEach(ScriptConnection::close);
                throw e;
            }
        }
        this.scriptConnections = List.copyOf(made);
        this.laneCount = own != null ? made.size() : lanes.size();
    }

    /** What went wrong so far, counted: a failure is any call Redis did not answer (timeouts included). */
    public record Counts(long failures, long timeouts, long failedOpen, long failedClosed, long shortCircuited,
                         long breakerOpenings, long scriptReloads, long localRejections) {
    }

    /**
     * False while a circuit breaker is open: Redis (in a Cluster, one of its masters) failed several calls in a row
     * and is not being asked. Never waits, and never stale for long when no decision asks: each call may send a
     * {@code PING} of its own (at most one a second to each Redis while its breaker is closed, and as the probe of
     * one open and due for a retry), whose answer counts as a decision's would and a later call sees. Two bugs
     * found so: only a decision closed a breaker, so a quiet store called itself unhealthy long after Redis was
     * back; and only decisions opened one, so a quiet store called a dead Redis healthy.
     */
    public boolean healthy() {
        if (nodeBreakers == null) {
            ping(breaker, () -> scriptConnections.get(lane()).command("PING"));
            return !breaker.isOpen();
        }
        Set<String> masters = masterIds();
        if (masters.isEmpty()) { // the topology is not known yet: the breaker standing in for every node
            ping(breaker, () -> lanes.get(lane()).connection().async().ping().toCompletableFuture());
            return !breaker.isOpen();
        }
        // only the masters serving slots now: a master that failed over opened its breaker as it died, and no call
        // goes to its id again to close it (a past bug: /healthz answered "unhealthy" forever after a failover)
        nodeBreakers.keySet().retainAll(masters);
        boolean healthy = true;
        for (String id : masters) {
            CircuitBreaker own = nodeBreakers.computeIfAbsent(id,
                    made -> new CircuitBreaker(breaker.threshold(), breaker.openNanos()));
            ping(own, () -> lanes.get(lane()).connection().getConnectionAsync(id)
                    .thenCompose(node -> node.async().ping()).toCompletableFuture());
            healthy &= !own.isOpen();
        }
        return healthy;
    }

    /**
     * Sends {@code ping} for {@code watched}, if it is due: as the probe of an open breaker due for a retry, or as
     * the health check of a closed one not checked for a second. Its answer counts as a decision's: a success
     * closes the breaker, a failure is counted and may open it.
     */
    private void ping(CircuitBreaker watched, Supplier<CompletableFuture<String>> ping) {
        if (watched.isOpen() ? !watched.allows() : !watched.healthCheckDue()) {
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
                watched.succeeded();
            } else {
                counted(failure instanceof CompletionException && failure.getCause() != null
                        ? failure.getCause() : failure, watched);
            }
        });
    }

    /** The node ids that have a breaker (for tests). */
    Set<String> breakerNodeIds() {
        return nodeBreakers == null ? Set.of() : Set.copyOf(nodeBreakers.keySet());
    }

    /** The ids of the Cluster's masters that serve slots, as the client last refreshed the topology. */
    private Set<String> masterIds() {
        Set<String> ids = new HashSet<>();
        for (RedisClusterNode node : partitions.get()) {
            if (node.getNodeId() != null && node.is(RedisClusterNode.NodeFlag.UPSTREAM) && !node.getSlots().isEmpty()) {
                ids.add(node.getNodeId());
            }
        }
        return ids;
    }

    /** The breaker that watches the Redis holding {@code redisKey}: in a Cluster, its slot's master's. */
    private CircuitBreaker breakerOf(String redisKey) {
        if (partitions == null) {
            return breaker;
        }
        RedisClusterNode master = partitions.get().getMasterBySlot(SlotHash.getSlot(redisKey));
        if (master == null || master.getNodeId() == null) {
            return breaker; // the topology is not known yet
        }
        CircuitBreaker own = nodeBreakers.get(master.getNodeId());
        if (own != null) {
            return own;
        }
        // a master not seen before: the topology changed, so the breakers of ids that serve no slot now go (else
        // each failover would leave one behind for the life of the store)
        nodeBreakers.keySet().retainAll(masterIds());
        return nodeBreakers.computeIfAbsent(master.getNodeId(),
                id -> new CircuitBreaker(breaker.threshold(), breaker.openNanos()));
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
        this.onFailure = policy;
    }

    public Counts counts() {
        return new Counts(failures.sum(), timeouts.sum(), failedOpen.sum(), failedClosed.sum(), shortCircuited.sum(),
                breakerOpenings.sum(), scriptReloads.sum(), localRejections.sum());
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
     * Connects to {@code redis://host:port[/db]} or to a Cluster, {@code redis-cluster://h1:p1,h2:p2}.
     *
     * @throws IllegalArgumentException for an address that is neither, naming it
     */
    private static RedisStore open(Builder settings) {
        String uri = settings.uri;
        // the addresses are read before anything is started, so a bad one leaves nothing running behind it
        List<RedisURI> seeds = addresses(uri, settings.timeout);
        Timer timer = timer();
        if (!uri.startsWith("redis-cluster://")) {
            return standalone(settings, seeds.get(0), timer);
        }
        TimeoutOptions timeouts = TimeoutOptions.enabled(settings.timeout);
        SocketOptions socket = SocketOptions.builder().connectTimeout(Duration.ofSeconds(2)).build();
        ClientResources resources = ClientResources.builder().timer(timer).nettyCustomizer(new NettyCustomizer() {
            /**
             * Many callers share a connection: their commands are flushed together, once per turn of the
             * connection's event loop, instead of one write each. Redis then reads several in one go, as from a
             * pipeline (measured: bench/README.md); a lone command still leaves at once.
             */
            @Override
            public void afterChannelInitialized(Channel channel) {
                channel.pipeline().addFirst(new FlushConsolidationHandler(256, true));
            }
        }).build();
        RedisClusterClient client = RedisClusterClient.create(resources, seeds);
        client.setOptions(ClusterClientOptions.builder().timeoutOptions(timeouts).socketOptions(socket)
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                        .enablePeriodicRefresh(Duration.ofSeconds(5)).enableAllAdaptiveRefreshTriggers().build())
                .build());
        Runnable shutdown = () -> {
            client.shutdown();
            timer.stop();
        };
        List<Lane> lanes = connect(resources, shutdown, () -> Lane.of(client.connect(ReplyCodec.INSTANCE)));
        return new RedisStore(settings, () -> shutDown(shutdown, resources), lanes, null, client::getPartitions,
                timer);
    }

    /**
     * A standalone Redis: the store's own connections only ({@link ScriptConnection}), one per core and at least
     * two, as a Cluster has Lettuce connections; no Lettuce client, event loops or connections at all.
     */
    private static RedisStore standalone(Builder settings, RedisURI seed, Timer timer) {
        ScriptConnection.Address address = new ScriptConnection.Address(seed.getHost(), seed.getPort(),
                seed.getUsername(), seed.getPassword() == null ? null : new String(seed.getPassword()),
                seed.getDatabase(), seed.getClientName());
        try {
            return new RedisStore(settings, timer::stop, List.of(), address, null, timer);
        } catch (RuntimeException e) {
            timer.stop();
            throw e;
        }
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
     * Checks {@code uri} as {@link #connect} reads it, without connecting: a configuration refuses a bad address
     * as it loads, not at every attempt to connect.
     *
     * @throws IllegalArgumentException naming the address, its password hidden
     */
    public static void checkAddress(String uri) {
        addresses(uri, HANDSHAKE);
    }

    private static List<RedisURI> addresses(String uri, Duration timeout) {
        if (uri == null) {
            throw new IllegalArgumentException("bad Redis address: null; expected redis://host:port[/db] or"
                    + " redis-cluster://host:port,host:port");
        }
        List<RedisURI> seeds = new ArrayList<>();
        if (uri.startsWith("redis-cluster://")) {
            for (String node : uri.substring("redis-cluster://".length()).split(",", -1)) {
                if (node.isBlank()) {
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a node is missing"
                            + " between commas; expected redis-cluster://host:port,host:port");
                }
                if (!NODE.matcher(node.trim()).matches()) {
                    // with credentials in the address, the part may be a piece of a password: never quoted
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": "
                            + (uri.indexOf('@') >= 0 ? "a part" : "\"" + node.trim() + "\"") + " between commas is not"
                            + " a node [credentials@]host:port (a comma in a password is written %2C)");
                }
                RedisURI seed = address("redis://" + node.trim(), uri, timeout);
                if (seed.getDatabase() != 0) {
                    throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": a Cluster has only"
                            + " database 0, got /" + seed.getDatabase());
                }
                seeds.add(seed);
            }
        } else if (uri.startsWith("redis://")) {
            seeds.add(address(uri, uri, timeout));
        } else {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri)
                    + "\": expected redis://host:port[/db] or redis-cluster://host:port,host:port");
        }
        return seeds;
    }

    /**
     * {@code uri} as it may be shown to anyone (messages, health checks, dashboards): a password in it
     * ({@code redis://:secret@host}, {@code redis://user:secret@host}, Lettuce's {@code redis://secret@host}) is
     * written {@code ****}. Everything before the last {@code @} is credentials: a host, port or database has none.
     */
    public static String shown(String uri) {
        if (uri.startsWith("redis-cluster://") && uri.indexOf(',') > 0) {
            // each node may carry its own credentials: each hidden on its own, so no node disappears; but only if
            // every part between commas is a node (a comma inside a password would show the part before it)
            String[] each = uri.substring("redis-cluster://".length()).split(",", -1);
            if (java.util.Arrays.stream(each).allMatch(node -> NODE.matcher(node.trim()).matches())) {
                StringBuilder nodes = new StringBuilder("redis-cluster://");
                for (int i = 0; i < each.length; i++) {
                    nodes.append(i == 0 ? "" : ",").append(shown(each[i]));
                }
                return nodes.toString();
            }
        }
        Matcher credentials = CREDENTIALS.matcher(uri);
        if (!credentials.find()) {
            return uri;
        }
        String user = credentials.group(2);
        return credentials.group(1) + (user == null ? "" : user + ":") + "****@" + uri.substring(credentials.end());
    }

    /**
     * The port of a node {@code redis://[credentials@]host[:port][/db][?options]} as written, or null when it has
     * none: what follows the host after the last {@code @} (so never a part of the credentials), up to a
     * {@code /} or {@code ?}; an IPv6 host is in brackets.
     */
    private static String portOf(String node) {
        String authority = authorityOf(node);
        int colon = authority.startsWith("[") ? authority.indexOf(':', Math.max(authority.indexOf(']'), 0))
                : authority.lastIndexOf(':');
        return colon < 0 ? null : authority.substring(colon + 1);
    }

    /** The host and port of {@code redis://[credentials@]host:port[/db][?options]}, as written. */
    private static String authorityOf(String node) {
        String rest = node.substring("redis://".length());
        String authority = rest.substring(rest.lastIndexOf('@') + 1);
        int end = 0;
        while (end < authority.length() && authority.charAt(end) != '/' && authority.charAt(end) != '?') {
            end++;
        }
        return authority.substring(0, end);
    }

    /** The database of {@code redis://[credentials@]host:port[/db][?options]} as written, or null. */
    private static String databaseOf(String node) {
        String rest = node.substring("redis://".length());
        String path = rest.substring(rest.lastIndexOf('@') + 1 + authorityOf(node).length());
        int query = path.indexOf('?');
        path = query < 0 ? path : path.substring(0, query);
        return path.isEmpty() || path.equals("/") ? null : path.substring(1);
    }

    /** A node of a Cluster address: optional credentials to an {@code @}, a host, and a port of digits. */
    private static final Pattern NODE = Pattern.compile("^(?:[^@]*@)?(?:\\[[^\\]]+\\]|[^:@\\[\\]/]+)(?::[^/@]*)?(?:/.*)?$");

    /** The scheme (if any), then an optional user and its colon, then the password, to the last @. */
    private static final Pattern CREDENTIALS = Pattern.compile("^((?:[a-z-]+://)?)(?:([^:@/]*):)?.*@");

    /**
     * Opens one connection per I/O thread; if one fails, the client and its threads are shut down (which
     * closes the connections made) before the failure goes on.
     */
    private static List<Lane> connect(ClientResources resources, Runnable shutdownClient,
                                      Supplier<Lane> connect) {
        List<Lane> lanes = new ArrayList<>();
        try {
            for (int i = 0; i < resources.ioThreadPoolSize(); i++) {
                lanes.add(connect.get());
            }
            return lanes;
        } catch (RuntimeException e) {
            shutDown(shutdownClient, resources);
            throw e;
        }
    }

    /**
     * The calling thread's connection, by its index: always the same one, so one thread's commands stay in order.
     * But never a connection's own reading thread's (a caller's continuation that decides or resets, and waits):
     * only that thread can read the answer it would wait for (a bug a review found: a reset from a continuation
     * waited out the timeout, and held up every call of that connection meanwhile).
     */
    private int lane() {
        Thread caller = Thread.currentThread();
        int lane = (int) (caller.getId() % laneCount);
        if (!scriptConnections.isEmpty() && scriptConnections.get(lane).reader() == caller) {
            return (lane + 1) % laneCount; // laneCount is at least 2 on a standalone Redis
        }
        return lane;
    }

    private static void shutDown(Runnable client, ClientResources resources) {
        client.run();
        resources.shutdown();
    }

    /** What connecting (the handshake after the socket opens) may take, however short the per-call timeout. */
    private static final Duration HANDSHAKE = Duration.ofSeconds(2);

    private static RedisURI address(String node, String uri, Duration timeout) {
        // the port as written: Lettuce reads "host:0" and "host:" as 6379, and "host:abc" as a host of that name
        String written = portOf(node);
        if (written != null
                && (!written.matches("[0-9]{1,5}") || Integer.parseInt(written) < 1 || Integer.parseInt(written) > 65535)) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": port \"" + written
                    + "\" of " + shown(node).substring("redis://".length()) + ": expected 1 to 65535");
        }
        // Lettuce's own words for these are a JDK parser's: "Expected authority at index 8", "For input string"
        String authority = authorityOf(node);
        if (authority.isEmpty() || authority.startsWith(":")) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": no host; expected"
                    + " redis://host:port[/db]");
        }
        String database = databaseOf(node);
        if (database != null && (!database.matches("[0-9]{1,10}") || Long.parseLong(database) > Integer.MAX_VALUE)) {
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": database \"" + database
                    + "\": expected a number from 0 to " + Integer.MAX_VALUE);
        }
        try {
            RedisURI address = RedisURI.create(node);
            // the URI's timeout bounds the connection handshake; each call is bounded by TimeoutOptions instead
            address.setTimeout(timeout.compareTo(HANDSHAKE) < 0 ? HANDSHAKE : timeout);
            return address;
        } catch (IllegalArgumentException e) {
            // e is not kept as the cause, and its message only with the address hidden: it may quote the password
            Matcher credentials = CREDENTIALS.matcher(uri);
            boolean secret = credentials.find();
            String reason = e.getMessage() == null ? "" : e.getMessage().replace(uri, shown(uri)).replace(node, shown(node));
            if (reason.isEmpty() || secret && reason.contains(credentials.group())) {
                reason = "not a valid URI";
            }
            throw new IllegalArgumentException("bad Redis address \"" + shown(uri) + "\": " + reason + (secret
                    ? " (in a password, characters such as a space, /, %, {, # are written percent-encoded: %20 for a space)"
                    : ""));
        }
    }

    private static String sha1(String text) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder(40);
            for (byte b : digest) {
                hex.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-1", e);
        }
    }

    /** The Redis key that holds the state of {@code key}. */
    static String redisKey(String key) {
        return "sluice:{" + key + "}";
    }

    /**
     * Waits for Redis's answer and decides with it on the calling thread: the connection's event loop only
     * hands the answer over, so its time goes to Redis's replies, not to parsing them. Every call is bounded
     * by the timeout, so this never hangs.
     */
    @Override
    public Decision decide(Rule rule, String key, long cost, long nowNanos) {
        String redisKey = redisKey(check(key));
        Call call = call(rule);
        checkCostAndTime(cost, nowNanos);
        CircuitBreaker watching = breakerOf(redisKey);
        Decision local = answeredHere(rule, key, cost, nowNanos, watching);
        if (local != null) {
            return local;
        }
        long resetsBefore = resets.get();
        String answer;
        try {
            answer = send(call, redisKey, cost, nowNanos).join();
        } catch (CompletionException e) {
            return failed(e.getCause(), rule, cost, nowNanos, watching);
        }
        return answered(rule, key, cost, nowNanos, answer, watching, resetsBefore);
    }

    @Override
    public CompletionStage<Decision> decideAsync(Rule rule, String key, long cost, long nowNanos) {
        String redisKey;
        Call call;
        try {
            redisKey = redisKey(check(key));
            call = call(rule);
            checkCostAndTime(cost, nowNanos);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        CircuitBreaker watching = breakerOf(redisKey);
        Decision local;
        try {
            local = answeredHere(rule, key, cost, nowNanos, watching);
        } catch (StoreUnavailableException e) { // raiseFailures with the breaker open
            return CompletableFuture.failedFuture(e);
        }
        if (local != null) {
            return CompletableFuture.completedFuture(local);
        }
        long resetsBefore = resets.get();
        return send(call, redisKey, cost, nowNanos).handle((answer, failure) -> failure == null
                ? answered(rule, key, cost, nowNanos, answer, watching, resetsBefore)
                : failed(failure, rule, cost, nowNanos, watching));
    }

    /** The decision this process makes without Redis (a rejection remembered, the breaker open), or null. */
    private Decision answeredHere(Rule rule, String key, long cost, long nowNanos, CircuitBreaker breaker) {
        Decision remembered = remembered(rule, key, cost, nowNanos);
        if (remembered != null) {
            return remembered;
        }
        if (!breaker.allows()) {
            shortCircuited.increment();
            if (raiseFailures) { // a tool that asked for failures gets one, not the policy's decision
                throw new StoreUnavailableException("Redis is not being asked: its circuit breaker opened after "
                        + breaker.threshold() + " failures in a row; it is tried again in "
                        + dev.sluice.DurationFormat.toMillisCeil(breaker.nanosUntilRetry()) + "ms", null);
            }
            return fallback(rule, cost, nowNanos, breaker);
        }
        return null;
    }

    /** Asks Redis: with the decisions waiting on the caller's connection (gcra.lua, standalone), or alone. */
    private CompletableFuture<String> send(Call call, String redisKey, long cost, long nowNanos) {
        int lane = lane();
        if (call.batchers() != null) {
            return call.batchers()[lane].submit(redisKey, gcraArgument(cost, nowNanos));
        }
        String[] keys = {redisKey};
        String[] arguments = call.arguments(cost, nowNanos);
        if (!scriptConnections.isEmpty()) {
            return timed(scriptConnections.get(lane).evaluate(call.script().sha(), call.script().text(), keys,
                    arguments));
        }
        // A Cluster, on Lettuce. A node's connection is made as its first command goes out, and that command's
        // timeout runs only once it is connected: to a node that accepts but does not answer, the handshake's 2 s
        // (a bug pinned in RedisClusterFailoverTest: a decision took 1.6 s). So the call is bounded here too.
        return timed(evaluate(lanes.get(lane), call.script(), keys, arguments).toCompletableFuture());
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
                              long resetsBefore) {
        Decision decision;
        try {
            decision = decision(rule, answer);
        } catch (RuntimeException e) {
            return failed(new IllegalStateException("a Sluice script answered \"" + printable(String.valueOf(answer))
                    + "\": " + e.getMessage(), e), rule, cost, nowNanos, breaker);
        }
        breaker.succeeded();
        return remember(rule, key, cost, nowNanos, decision, resetsBefore);
    }

    /** {@code answer} with each char outside printable ASCII as {@code \xNN}, for a message. */
    private static String printable(String answer) {
        StringBuilder shown = new StringBuilder(answer.length());
        for (int i = 0; i < answer.length(); i++) {
            char c = answer.charAt(i);
            if (c >= ' ' && c < 127) {
                shown.append(c);
            } else {
                shown.append(String.format("\\x%02x", (int) c));
            }
        }
        return shown.toString();
    }

    /** One call of {@code script}, by its SHA-1, sent whole when the server answers {@code NOSCRIPT}. */
    private CompletionStage<String> evaluate(Lane lane, Script script, String[] keys, String[] arguments) {
        RedisScriptingAsyncCommands<String, String> scripting = lane.scriptingAsync();
        return scripting.<String>evalsha(script.sha(), ScriptOutputType.VALUE, keys, arguments)
                .handle((answer, failure) -> {
                    if (failure == null) {
                        return CompletableFuture.completedFuture(answer);
                    }
                    if (failure instanceof RedisNoScriptException || failure.getCause() instanceof RedisNoScriptException) {
                        scriptReloads.increment();
                        return scripting.<String>eval(script.text(), ScriptOutputType.VALUE, keys, arguments)
                                .toCompletableFuture();
                    }
                    return CompletableFuture.<String>failedFuture(failure);
                }).thenCompose(stage -> stage);
    }

    private boolean remembers(Rule rule, long cost, long nowNanos) {
        Algorithm algorithm = rule.algorithm();
        return rememberRejections && nowNanos == STORE_CLOCK && cost > 0
                && (algorithm == Algorithm.FIXED_WINDOW || algorithm == Algorithm.GCRA || algorithm == Algorithm.TOKEN_BUCKET);
    }

    /** The remembered rejection that answers this request, counted down to now; {@code null} if none. */
    private Decision remembered(Rule rule, String key, long cost, long nowNanos) {
        if (!remembers(rule, cost, nowNanos)) {
            return null;
        }
        Memory memory = rejections.get(rule);
        ConcurrentHashMap<String, Rejection> byKey = memory == null ? null : memory.byKey();
        Rejection rejection = byKey == null ? null : byKey.get(key);
        if (rejection == null) {
            return null;
        }
        long now = System.nanoTime();
        if (now - rejection.until >= 0) {
            byKey.remove(key, rejection);
            return null;
        }
        if (cost != rejection.cost) {
            // another cost has another retry_after (a greater one may never fit): only Redis knows it
            return null;
        }
        localRejections.increment();
        Decision first = rejection.decision;
        long elapsed = now - rejection.at;
        return new Decision(false, first.remaining(), rejection.until - now, Math.max(0, first.resetAfterNanos() - elapsed),
                0, first.limit(), Math.max(0, first.limitResetAfterNanos() - elapsed));
    }

    /**
     * Remembers a rejection Redis answered to a call sent when {@link #resets} was {@code resetsBefore}. None is
     * remembered from a call that a reset overlapped: Redis may have run it before the reset's {@code DEL}, and
     * its rejection would then outlive the reset (a bug a review found: a reset undone for up to an hour).
     */
    private Decision remember(Rule rule, String key, long cost, long nowNanos, Decision decision, long resetsBefore) {
        if (decision.allowed()) {
            if (cost > 0 && !rejections.isEmpty()) {
                // the key was charged: a rejection remembered for another cost now says too much remaining and too
                // short a retry_after (a bug found by trying serve on Redis: obeying its Retry-After met another 429)
                for (Memory memory : rejections.values()) {
                    if (memory.byKey().containsKey(key)) { // a lookup, not remove's lock of the bin
                        memory.byKey().remove(key);
                    }
                }
            }
            return decision;
        }
        if (decision.never() || !remembers(rule, cost, nowNanos) || resets.get() != resetsBefore) {
            return decision;
        }
        Memory memory = rejections.get(rule);
        if (memory == null) {
            if (rejections.size() >= MAX_RULES) {
                rejections.clear();
            }
            memory = rejections.computeIfAbsent(rule, r -> new Memory());
        }
        ConcurrentHashMap<String, Rejection> byKey = memory.byKey();
        long now = System.nanoTime();
        if (byKey.size() >= mostRemembered) {
            memory.sweep(now);
        }
        if (byKey.size() < mostRemembered) {
            Rejection rejection = new Rejection(cost, now + decision.retryAfterNanos(), now, decision);
            byKey.put(key, rejection);
            memory.dueBy(Math.max(rejection.until, now + SWEEP_NANOS));
            if (resets.get() != resetsBefore) { // a reset began meanwhile, and may have looked before the put
                byKey.remove(key, rejection);
            }
        }
        return decision;
    }

    /** Counts a call Redis did not answer, and decides it by the failure policy. */
    private Decision failed(Throwable failure, Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        while (failure instanceof CompletionException && failure.getCause() != null) {
            failure = failure.getCause();
        }
        counted(failure, breaker);
        if (raiseFailures) {
            throw new StoreUnavailableException("Redis did not answer: " + failure.getMessage(), failure);
        }
        return fallback(rule, cost, nowNanos, breaker);
    }

    /** Counts a call Redis did not answer, as a failure, a timeout if it was one, and in the breaker. */
    private void counted(Throwable failure, CircuitBreaker breaker) {
        failures.increment();
        Throwable cause = failure.getCause() != null && !(failure instanceof RedisCommandTimeoutException)
                ? failure.getCause() : failure;
        if (failure instanceof RedisCommandTimeoutException || cause instanceof RedisCommandTimeoutException
                || failure instanceof java.util.concurrent.TimeoutException) {
            timeouts.increment();
        }
        if (breaker.failed(failure)) {
            breakerOpenings.increment();
        }
    }

    /** The decision of the failure policy: admitted as an untouched key, or rejected until the next try. */
    private Decision fallback(Rule rule, long cost, long nowNanos, CircuitBreaker breaker) {
        long now = nowNanos == STORE_CLOCK ? Clock.system().nanos() : nowNanos;
        if (onFailure == FailurePolicy.OPEN) {
            failedOpen.increment();
            return rule.decide(null, now, cost).decision();
        }
        failedClosed.increment();
        long retryAfter = Math.max(breaker.nanosUntilRetry(), timeoutNanos);
        return new Decision(false, 0, retryAfter, 0, 0, rule.limits().get(0));
    }

    private static String check(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("key must not be empty");
        }
        return key;
    }

    /** The length of one decision answered by {@code gcra.lua}: the byte allowed, then four doubles. */
    static final int BINARY_ANSWER = 33;

    /**
     * The decision a script answered: {@code gcra.lua}'s {@value #BINARY_ANSWER} bytes (its first, allowed, is
     * the byte 0 or 1), or {@code decide.lua}'s seven whole numbers separated by single spaces (its first is the
     * digit 0 or 1). The scripts say why each answers as it does.
     */
    static Decision decision(Rule rule, String reply) {
        if (reply == null) {
            throw new IllegalStateException("expected a decision, got nil");
        }
        if (!reply.isEmpty() && reply.charAt(0) <= 1) {
            return binaryDecision(rule, reply);
        }
        long[] fields = new long[7];
        int at = 0;
        for (int i = 0; i < fields.length; i++) {
            int end = i == fields.length - 1 ? reply.length() : reply.indexOf(' ', at);
            if (end < 0) {
                throw new IllegalStateException("expected seven numbers");
            }
            fields[i] = Long.parseLong(reply, at, end, 10);
            at = end + 1;
        }
        return new Decision(fields[0] == 1, fields[1], fields[2], fields[3], fields[4],
                rule.limits().get((int) fields[5]), fields[6]);
    }

    private static Decision binaryDecision(Rule rule, String reply) {
        if (reply.length() != BINARY_ANSWER) {
            throw new IllegalStateException("expected " + BINARY_ANSWER + " bytes, got " + reply.length());
        }
        return new Decision(reply.charAt(0) == 1, wholeNumber(reply, 1), wholeNumber(reply, 9),
                wholeNumber(reply, 17), wholeNumber(reply, 25), rule.limits().get(0));
    }

    /** The little-endian double at {@code at} of a reply read one char per byte, as the whole number it holds. */
    private static long wholeNumber(String reply, int at) {
        long bits = 0;
        for (int i = 7; i >= 0; i--) {
            bits = bits << 8 | (reply.charAt(at + i) & 0xFF);
        }
        double value = Double.longBitsToDouble(bits);
        long whole = (long) value;
        if (whole != value) {
            throw new IllegalStateException("expected whole numbers, got " + value);
        }
        return whole;
    }

    /** The answers of one call of {@code gcra.lua}, one a decision, in the order of its keys. */
    static String[] gcraAnswers(String reply) {
        if (reply.length() % BINARY_ANSWER != 0) {
            throw new IllegalStateException("gcra.lua answered " + reply.length() + " bytes, not a multiple of "
                    + BINARY_ANSWER);
        }
        String[] answers = new String[reply.length() / BINARY_ANSWER];
        for (int i = 0; i < answers.length; i++) {
            answers[i] = reply.substring(i * BINARY_ANSWER, (i + 1) * BINARY_ANSWER);
        }
        return answers;
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

    /** The store's own connections (a standalone Redis), for tests. */
    List<ScriptConnection> connections() {
        return scriptConnections;
    }

    /** The number of rules whose calls are kept (at most {@link #MAX_RULES}). */
    int rulesKept() {
        return Math.max(calls.size(), rejections.size());
    }

    /**
     * The script for {@code rule} and its arguments that depend on the rule only: decide.lua's with the first
     * three and the sixth left per call; gcra.lua's without the one per decision at their end.
     */
    private Call callOf(Rule rule) {
        String[] general = ruleArguments(rule); // checks every bound, whichever script decides
        if (rule.limits().size() != 1 || code(rule.algorithm(), rule.limits().get(0)) != 4) {
            return new Call(DECIDE, general, null);
        }
        Limit limit = rule.limits().get(0);
        long amount = limit.amount();
        long period = limit.periodNanos();
        long tq = period / amount;
        long tr = period % amount;
        long burstStep = limit.burst() * tr; // B·tr < B·L < 2^53 (checked)
        long dq = limit.burst() * tq + burstStep / amount;
        long dr = burstStep % amount;
        String[] fixed = {general[3], general[4], Long.toString(EXPLICIT_TIME_TTL_MARGIN_MS),
                Long.toString(amount), Long.toString(limit.burst()), Long.toString(period),
                Long.toString(tq), Long.toString(tr), Long.toString(dq), Long.toString(dr)};
        if (batchKeys <= 1) {
            return new Call(GCRA, fixed, null);
        }
        Batcher[] batchers = new Batcher[laneCount];
        for (int i = 0; i < batchers.length; i++) {
            ScriptConnection connection = scriptConnections.get(i);
            batchers[i] = new Batcher(fixed,
                    (keys, arguments) -> connection.evaluate(GCRA.sha(), GCRA.text(), keys, arguments),
                    RedisStore::gcraAnswers, batchKeys, timeoutNanos, connection);
        }
        return new Call(GCRA, fixed, batchers);
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

    /** The script's arguments that depend on the rule only; the first three and the sixth are per call. */
    private static String[] ruleArguments(Rule rule) {
        List<String> arguments = new ArrayList<>(List.of("", "", "",
                Integer.toString(rule.mode().ordinal()), Long.toString(rule.maxDelayNanos()), "",
                Integer.toString(rule.limits().size())));
        if (rule.maxDelayNanos() >= HALF_EXACT) {
            throw new IllegalArgumentException("max delay " + dev.sluice.DurationFormat.format(rule.maxDelayNanos())
                    + " is too long for the Redis store: at most 2^52 ns (52 days)");
        }
        for (Limit limit : rule.limits()) {
            checkFits(limit, rule.algorithm());
            arguments.add(Integer.toString(code(rule.algorithm(), limit)));
            arguments.add(Long.toString(limit.amount()));
            arguments.add(Long.toString(limit.periodNanos() / NS));
            arguments.add(Long.toString(limit.burst()));
        }
        return arguments.toArray(String[]::new);
    }

    private static int code(Algorithm algorithm, Limit limit) {
        switch (algorithm) {
            case FIXED_WINDOW:
                return 1;
            case SLIDING_LOG:
                return 2;
            case SLIDING_WINDOW:
                return 3;
            case TOKEN_BUCKET:
                return limit.refill() == Refill.INTERVAL ? 5 : 4;
            default:
                return 4;
        }
    }

    /**
     * Checks that a Redis store can decide {@code rule} exactly, before anything is decided, and before any
     * store is connected to.
     *
     * @throws IllegalArgumentException naming the limit (or max delay) beyond Lua's exact range
     */
    public static void checkExact(Rule rule) {
        ruleArguments(rule);
    }

    @Override
    public void check(Rule rule) {
        checkExact(rule);
    }

    /** Refuses a limit whose arithmetic could leave the doubles' exact range (see the class comment). */
    static void checkFits(Limit limit, Algorithm algorithm) {
        long period = limit.periodNanos();
        String refused = null;
        if (period % NS != 0) {
            refused = "its period is not a whole number of milliseconds";
        } else if (period >= EXACT) {
            refused = "its period is 104 days or longer";
        } else if (Math.multiplyHigh(limit.amount(), period / NS) != 0 || limit.amount() * (period / NS) >= EXACT) {
            refused = "L × P(ms) is 2^53 or more";
        } else if (algorithm.hasBurst() && limit.burst() * limit.amount() >= EXACT) {
            refused = "B × L is 2^53 or more";
        } else if (algorithm.hasBurst() && BigInteger.valueOf(limit.burst()).multiply(BigInteger.valueOf(period))
                .divide(BigInteger.valueOf(limit.amount())).compareTo(BigInteger.valueOf(HALF_EXACT)) >= 0) {
            refused = "B × P / L is 52 days or longer";
        }
        if (refused != null) {
            throw new IllegalArgumentException("limit " + limit + " is beyond the Redis store: " + refused
                    + " (Lua's numbers are exact only up to 2^53)");
        }
    }

    @Override
    public void reset(Rule rule, String key) {
        String redisKey = redisKey(check(key));
        // counted before and after the DEL: a call sent before the DEL's answer remembers no rejection (remember)
        resets.incrementAndGet();
        forget(key);
        try {
            if (lanes.isEmpty()) {
                timed(scriptConnections.get(lane()).command("DEL", redisKey)).join();
            } else {
                lanes.get(lane()).keys().del(redisKey);
            }
        } catch (CompletionException e) { // on the store's own connections: what Redis did, as Lettuce throws it
            RuntimeException cause = e.getCause() instanceof RuntimeException failure ? failure : e;
            counted(cause, breakerOf(redisKey));
            throw new StoreUnavailableException("Redis did not answer: " + cause.getMessage(), cause);
        } catch (RuntimeException e) { // a timeout, a connection lost: counted as any call Redis did not answer
            counted(e, breakerOf(redisKey));
            throw new StoreUnavailableException("Redis did not answer: " + e.getMessage(), e);
        } finally {
            resets.incrementAndGet();
            forget(key); // what a call answered between the two counts remembered
        }
    }

    /**
     * Forgets the rejections of {@code key} under every rule: a limiter's acquire remembers rejections under its
     * delaying rules too (one key, one state, whatever rule read it), and a reset must forget them all.
     */
    private void forget(String key) {
        for (Memory memory : rejections.values()) {
            memory.byKey().remove(key);
        }
    }

    /** 2^52 ns (about 52 days), less one: the longest max delay the scripts keep exact (see ruleArguments). */
    @Override
    public long longestDelayNanos() {
        return HALF_EXACT - 1;
    }

    @Override
    public void close() throws Exception {
        for (ScriptConnection connection : scriptConnections) {
            connection.close();
        }
        for (Lane lane : lanes) {
            lane.connection().close();
        }
        client.close();
    }

    @Override
    public String toString() {
        return "RedisStore(" + DECIDE.sha() + ", " + GCRA.sha() + ")";
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

        /** The most rejections remembered under one rule (default {@link #MAX_REMEMBERED}; tests make it small). */
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
         * connection, always has another to send on; at most 256.
         */
        public Builder connections(int count) {
            if (count < 2 || count > 256) {
                throw new IllegalArgumentException("a store makes 2 to 256 connections to Redis, got " + count);
            }
            this.connections = count;
            return this;
        }

        /**
         * Connects.
         *
         * @throws IllegalArgumentException for an address that is not redis:// or redis-cluster://, naming it
         * @throws io.lettuce.core.RedisConnectionException when Redis cannot be reached at all
         */
        public RedisStore build() {
            return open(this);
        }
    }
}
