package dev.sluice.testkit.redis;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A real Redis Cluster for tests: {@code masters} redis-server processes in cluster mode on free ports, the
 * 16384 slots split evenly between them, joined with {@code CLUSTER MEET}, and ready once every node says
 * {@code cluster_state:ok}. Built with plain commands, so it needs no {@code redis-cli}.
 */
public final class RedisCluster implements AutoCloseable {
    private static final int SLOTS = 16384;

    private final List<RedisServer> nodes;

    private RedisCluster(List<RedisServer> nodes) {
        this.nodes = nodes;
    }

    /** Starts a cluster of {@code masters} masters (3 is the smallest Redis accepts for failover). */
    public static RedisCluster start(int masters) throws IOException {
        return start(masters, 0);
    }

    /**
     * Starts {@code masters} masters, each with {@code replicasPerMaster} replicas that take over when it dies
     * (after the node timeout of 2 s and an election).
     */
    public static RedisCluster start(int masters, int replicasPerMaster) throws IOException {
        List<RedisServer> nodes = new ArrayList<>();
        int total = masters * (1 + replicasPerMaster);
        try {
            for (int i = 0; i < total; i++) {
                nodes.add(RedisServer.start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", "2000"));
            }
            for (int i = 0; i < masters; i++) {
                try (Resp resp = nodes.get(i).connect()) {
                    int from = SLOTS * i / masters;
                    int to = SLOTS * (i + 1) / masters;
                    List<String> command = new ArrayList<>(List.of("CLUSTER", "ADDSLOTS"));
                    for (int slot = from; slot < to; slot++) {
                        command.add(Integer.toString(slot));
                    }
                    resp.call(command.toArray(String[]::new));
                }
            }
            for (int i = 1; i < total; i++) {
                try (Resp resp = nodes.get(i).connect()) {
                    resp.call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(nodes.get(0).port()));
                }
            }
            RedisCluster cluster = new RedisCluster(nodes);
            cluster.awaitKnown(total);
            for (int i = masters; i < total; i++) {
                String master = nodeId(nodes.get((i - masters) % masters));
                try (Resp resp = nodes.get(i).connect()) {
                    resp.call("CLUSTER", "REPLICATE", master);
                }
            }
            cluster.awaitOk();
            return cluster;
        } catch (IOException | RuntimeException e) {
            for (RedisServer node : nodes) {
                closeQuietly(node);
            }
            throw e;
        }
    }

    static String nodeId(RedisServer node) throws IOException {
        try (Resp resp = node.connect()) {
            return (String) resp.call("CLUSTER", "MYID");
        }
    }

    private void awaitKnown(int count) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean known = true;
            for (RedisServer node : nodes) {
                try (Resp resp = node.connect()) {
                    known &= ((String) resp.call("CLUSTER", "INFO")).contains("cluster_known_nodes:" + count);
                }
            }
            if (known) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("the nodes did not all meet within 30 s");
            }
            RedisServer.sleep(50);
        }
    }

    /** The master that serves {@code key}'s slot, as the first live node sees it. */
    public RedisServer masterOf(String key) throws IOException {
        for (RedisServer node : nodes) {
            if (!node.isAlive()) {
                continue;
            }
            try (Resp resp = node.connect()) {
                long slot = (Long) resp.call("CLUSTER", "KEYSLOT", key);
                for (Object range : (List<?>) resp.call("CLUSTER", "SLOTS")) {
                    List<?> fields = (List<?>) range;
                    if ((Long) fields.get(0) <= slot && slot <= (Long) fields.get(1)) {
                        long port = (Long) ((List<?>) fields.get(2)).get(1);
                        return nodes.stream().filter(n -> n.port() == port).findFirst().orElseThrow();
                    }
                }
            }
        }
        throw new IOException("no live node knows the master of " + key);
    }

    private void awaitOk() throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean ok = true;
            for (RedisServer node : nodes) {
                try (Resp resp = node.connect()) {
                    String info = (String) resp.call("CLUSTER", "INFO");
                    ok &= info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:" + nodes.size());
                    if (resp.call("ROLE") instanceof List<?> role && "slave".equals(role.get(0))) {
                        ok &= "connected".equals(role.get(3));
                    }
                }
            }
            if (ok) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("the cluster did not reach cluster_state:ok within 30 s");
            }
            RedisServer.sleep(50);
        }
    }

    public List<RedisServer> nodes() {
        return nodes;
    }

    /** {@code redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...}. */
    public String uri() {
        return "redis-cluster://" + nodes.stream().map(n -> "127.0.0.1:" + n.port()).collect(Collectors.joining(","));
    }

    @Override
    public void close() {
        for (RedisServer node : nodes) {
            closeQuietly(node);
        }
    }

    private static void closeQuietly(RedisServer node) {
        try {
            node.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
