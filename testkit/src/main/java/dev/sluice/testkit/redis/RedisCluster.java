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
        List<RedisServer> nodes = new ArrayList<>();
        try {
            for (int i = 0; i < masters; i++) {
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
                    if (i > 0) {
                        resp.call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(nodes.get(0).port()));
                    }
                }
            }
            RedisCluster cluster = new RedisCluster(nodes);
            cluster.awaitOk();
            return cluster;
        } catch (IOException | RuntimeException e) {
            for (RedisServer node : nodes) {
                closeQuietly(node);
            }
            throw e;
        }
    }

    private void awaitOk() throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean ok = true;
            for (RedisServer node : nodes) {
                try (Resp resp = node.connect()) {
                    String info = (String) resp.call("CLUSTER", "INFO");
                    ok &= info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:" + nodes.size());
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
