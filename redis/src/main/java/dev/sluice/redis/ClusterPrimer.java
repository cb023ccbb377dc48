package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.Partitions;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Makes a Cluster store ready to meet its timeout from its first decision: each of its connections connected to
 * every master that serves slots, the scripts loaded on each master, and the path of a call run a few thousand
 * times.
 *
 * <p>Why: a review saw a fresh {@code sluice serve} on a healthy Cluster decide its first second of traffic by the
 * failure policy (700 to 800 requests; pinned in RedisClusterStartTest). Three costs fell on the first calls and
 * ran inside their 50 ms: Lettuce connects to a master only when the first command for one of its slots goes out;
 * a master that has never run a script answers {@code NOSCRIPT} and the call goes again whole; and Lettuce's path
 * for a Cluster command is long, and runs interpreted until the JIT has seen it often (300 decisions sent at once
 * took 40 ms to send and up to 90 ms to be answered, where a warmed store takes 10 and 20). A few failures in a
 * row opened a master's breaker, and its keys were decided by the policy for the next second. The store's own
 * connections to a standalone Redis make none of the three costs worth paying for.
 *
 * <p>Warming sends {@link #WARMING_CALLS} calls of cost 0 on keys of their own, which read and change nothing (an
 * untouched key stays absent), about 0.1 to 0.3 s, once, as the store opens. For a master that a topology change brings (a
 * promoted replica, say) only the connections and the scripts are made, without waiting: the JVM is warm by then.
 *
 * <p>All of it is best effort: a master that cannot be reached is left to the failure policy and its breaker, as
 * it would be once serving, and Lettuce connects to it when a command next asks.
 */
final class ClusterPrimer {
    /** Enough calls for the JIT's first tier to compile their path (a method is compiled after about 200 calls). */
    static final int WARMING_CALLS = 2_400;
    /** The longest opening a store waits for: a connect's own timeout (2 s) and a little more, then the warming. */
    private static final Duration CONNECT_BOUND = Duration.ofMillis(2_500);
    private static final Duration WARMING_BOUND = Duration.ofSeconds(1);
    /** The scripts each master is given, and a rule each, of cost 0, that warms their calls. */
    private static final List<RuleScript> WARMING = List.of(
            RuleScript.of(Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.of(1, Duration.ofSeconds(1))))),
            RuleScript.of(Rule.of(Algorithm.GCRA, List.of(Limit.of(1, Duration.ofSeconds(1))))));

    private ClusterPrimer() {
    }

    /** Connects, loads the scripts, then warms; waits a few seconds at most, if a master does not answer. */
    static void prime(List<StatefulRedisClusterConnection<String, String>> connections, Partitions partitions) {
        if (!await(connect(connections, partitions), CONNECT_BOUND.toNanos())) {
            return; // a master unreached: its calls would only time out
        }
        List<String> keys = keyPerMaster(partitions);
        int rounds = Math.max(1, WARMING_CALLS / Math.max(1, connections.size() * keys.size() * WARMING.size()));
        long deadline = System.nanoTime() + WARMING_BOUND.toNanos();
        for (int round = 0; round < rounds; round++) {
            List<CompletableFuture<?>> calls = new ArrayList<>();
            for (StatefulRedisClusterConnection<String, String> connection : connections) {
                for (String key : keys) {
                    for (RuleScript rule : WARMING) {
                        calls.add(connection.async().evalsha(rule.script().sha(), ScriptOutputType.VALUE,
                                new String[] {key}, rule.arguments(0, Store.STORE_CLOCK)).toCompletableFuture());
                    }
                }
            }
            if (!await(CompletableFuture.allOf(calls.toArray(CompletableFuture[]::new)),
                    deadline - System.nanoTime())) {
                return;
            }
        }
    }

    /**
     * Connects each connection to every master among {@code nodes}, and loads the scripts on each master; the
     * answer completes once all are done (or failed).
     */
    static CompletableFuture<Void> connect(List<StatefulRedisClusterConnection<String, String>> connections,
                                           Iterable<RedisClusterNode> nodes) {
        List<CompletableFuture<?>> steps = new ArrayList<>();
        for (RedisClusterNode node : nodes) {
            if (!servesSlots(node) || node.getUri() == null) {
                continue;
            }
            RedisURI uri = node.getUri();
            for (int i = 0; i < connections.size(); i++) {
                boolean loadScripts = i == 0; // the script cache is the server's: once for each master is enough
                steps.add(nodeConnection(connections.get(i), uri).thenCompose(connection -> {
                    if (!loadScripts) {
                        return CompletableFuture.completedFuture(null);
                    }
                    List<CompletableFuture<String>> loads = new ArrayList<>();
                    for (RuleScript rule : WARMING) {
                        loads.add(connection.async().scriptLoad(rule.script().text()).toCompletableFuture());
                    }
                    return CompletableFuture.allOf(loads.toArray(CompletableFuture[]::new));
                }));
            }
        }
        return CompletableFuture.allOf(steps.toArray(CompletableFuture[]::new));
    }

    private static boolean servesSlots(RedisClusterNode node) {
        return node.is(RedisClusterNode.NodeFlag.UPSTREAM) && !node.getSlots().isEmpty();
    }

    /**
     * A key in a slot of each master (the first found), so that warming reaches them all; outside the store's own
     * ({@code sluice:{...}}), so no user's key is ever read by a warming call.
     */
    private static List<String> keyPerMaster(Partitions partitions) {
        Set<String> masters = new HashSet<>();
        for (RedisClusterNode node : partitions) {
            if (servesSlots(node)) {
                masters.add(node.getNodeId());
            }
        }
        Set<String> reached = new HashSet<>();
        List<String> keys = new ArrayList<>();
        for (int i = 0; reached.size() < masters.size() && i < 1_000_000; i++) {
            String key = "sluice-warming:{" + i + "}";
            RedisClusterNode master = partitions.getMasterBySlot(SlotHash.getSlot(key));
            if (master != null && reached.add(master.getNodeId())) {
                keys.add(key);
            }
        }
        return keys;
    }

    /**
     * The connection Lettuce sends a master's slot commands on: the one known by the master's host and port (not
     * by node id, which Lettuce keeps apart), so the first decision for one of its slots finds it made.
     */
    private static CompletableFuture<StatefulRedisConnection<String, String>> nodeConnection(
            StatefulRedisClusterConnection<String, String> connection, RedisURI uri) {
        try {
            return connection.getConnectionAsync(uri.getHost(), uri.getPort());
        } catch (RuntimeException e) { // a node the topology no longer has: refused at once
            return CompletableFuture.failedFuture(e);
        }
    }

    /** Whether {@code step} succeeded within {@code nanos}. */
    private static boolean await(CompletableFuture<?> step, long nanos) {
        try {
            step.get(Math.max(0, nanos), TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException | TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
