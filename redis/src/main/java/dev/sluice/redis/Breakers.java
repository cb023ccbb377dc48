package dev.sluice.redis;

import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.models.partitions.Partitions;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Supplier;

/**
 * The circuit breakers of one store: a standalone Redis has one; a Cluster has one per master, by node id, made as
 * the node is first asked, and one that stands in for every node while the topology is not known.
 *
 * <p>Why one per master: a master that hangs opens its own, and the others keep deciding (a bug pinned in
 * RedisClusterFailoverTest: one breaker for every node never opened while the others answered, and once open it
 * decided every node's keys by the policy). A failover moves the slots to another id, whose breaker starts closed;
 * the old id's breaker goes as the new id is first asked, or at the next health check.
 */
final class Breakers {
    /** The breaker of a standalone Redis; in a Cluster, of a node whose place is not known yet. */
    private final CircuitBreaker standIn;
    /** In a Cluster, each master's breaker; null for a standalone Redis. */
    private final ConcurrentHashMap<String, CircuitBreaker> byNode;
    /** The Cluster's slots and their masters, as the client last refreshed them; null for a standalone Redis. */
    private final Supplier<Partitions> partitions;

    /** The breaker of a standalone Redis: after {@code threshold} failures in a row, open for {@code openNanos}. */
    Breakers(int threshold, long openNanos) {
        this(threshold, openNanos, null);
    }

    /** A Cluster's breakers, one per master of {@code partitions} (null: a standalone Redis). */
    Breakers(int threshold, long openNanos, Supplier<Partitions> partitions) {
        this.standIn = new CircuitBreaker(threshold, openNanos);
        this.partitions = partitions;
        this.byNode = partitions == null ? null : new ConcurrentHashMap<>();
    }

    /** The breaker that watches the Redis holding {@code redisKey}: in a Cluster, its slot's master's. */
    CircuitBreaker of(String redisKey) {
        if (partitions == null) {
            return standIn;
        }
        RedisClusterNode master = partitions.get().getMasterBySlot(SlotHash.getSlot(redisKey));
        if (master == null || master.getNodeId() == null) {
            return standIn; // the topology is not known yet
        }
        CircuitBreaker own = byNode.get(master.getNodeId());
        if (own != null) {
            return own;
        }
        // a master not seen before: the topology changed, so the breakers of ids that serve no slot now go (else
        // each failover would leave one behind for the life of the store)
        byNode.keySet().retainAll(masterIds());
        return byNode.computeIfAbsent(master.getNodeId(), this::made);
    }

    /**
     * Whether every breaker that watches a Redis now is closed, once {@code check} has been given each of them with
     * its node id (null for a standalone Redis, or for the stand-in while a Cluster's topology is not known) to
     * check the node's health if it is due.
     *
     * <p>Only the masters serving slots now count: a master that failed over opened its breaker as it died, and no
     * call goes to its id again to close it (a past bug: /healthz answered "unhealthy" forever after a failover).
     */
    boolean closed(BiConsumer<CircuitBreaker, String> check) {
        Set<String> masters = partitions == null ? Set.of() : masterIds();
        if (masters.isEmpty()) {
            check.accept(standIn, null);
            return !standIn.isOpen();
        }
        byNode.keySet().retainAll(masters);
        boolean closed = true;
        for (String id : masters) {
            CircuitBreaker own = byNode.computeIfAbsent(id, this::made);
            check.accept(own, id);
            closed &= !own.isOpen();
        }
        return closed;
    }

    /** The node ids that have a breaker (for tests). */
    Set<String> nodeIds() {
        return byNode == null ? Set.of() : Set.copyOf(byNode.keySet());
    }

    private CircuitBreaker made(String nodeId) {
        return new CircuitBreaker(standIn.threshold(), standIn.openNanos());
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
}
