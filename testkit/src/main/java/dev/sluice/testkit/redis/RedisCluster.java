package dev.sluice.testkit.redis;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
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
        return start(masters, replicasPerMaster, null);
    }

    /**
     * Starts {@code masters} masters that speak TLS to clients ({@link #tlsUri()}) and to one another (the cluster
     * bus, each node trusting {@code certificate}), and announce their TLS ports; each keeps a plain port too, the
     * test's own.
     */
    public static RedisCluster startTls(int masters, SelfSignedCertificate certificate) throws IOException {
        return start(masters, 0, certificate);
    }

    private static RedisCluster start(int masters, int replicasPerMaster, SelfSignedCertificate certificate)
            throws IOException {
        List<RedisServer> nodes = new ArrayList<>();
        int total = masters * (1 + replicasPerMaster);
        try {
            for (int i = 0; i < total; i++) {
                List<String> arguments = new ArrayList<>(List.of("--cluster-enabled", "yes", "--cluster-config-file",
                        "nodes.conf", "--cluster-node-timeout", "2000"));
                if (certificate != null) {
                    arguments.addAll(List.of("--tls-port", RedisServer.FREE_TLS_PORT, "--tls-cert-file",
                            certificate.certificate().toString(), "--tls-key-file", certificate.key().toString(),
                            "--tls-ca-cert-file", certificate.certificate().toString(), "--tls-auth-clients", "no",
                            "--tls-cluster", "yes"));
                }
                nodes.add(RedisServer.start(arguments.toArray(String[]::new)));
            }
            for (int i = 0; i < total; i++) {
                // each node its own config epoch before they meet, as redis-cli does: nodes that meet with equal
                // epochs settle the clash one bump at a time, and a master killed while they do can leave its
                // replica claiming its slots with an epoch the voters refuse, for good (a CI run saw no failover)
                try (Resp resp = nodes.get(i).connect()) {
                    resp.call("CLUSTER", "SET-CONFIG-EPOCH", Integer.toString(i + 1));
                }
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
                    // with TLS the bus is 10,000 above the TLS port, so that is the port a node is met at
                    resp.call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(certificate != null
                            ? nodes.get(0).tlsPort() : nodes.get(0).port()));
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

    /**
     * Waits until every node says {@code cluster_state:ok}, every replica is connected to its master, and every
     * node sees the same cluster: the same roles, masters, config epochs and slots ({@link #view}). A test that
     * kills a master before the others agree on it can wait for a failover that never comes.
     */
    private void awaitOk() throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean ok = true;
            Set<String> views = new HashSet<>();
            for (RedisServer node : nodes) {
                try (Resp resp = node.connect()) {
                    String info = (String) resp.call("CLUSTER", "INFO");
                    ok &= info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:" + nodes.size());
                    if (resp.call("ROLE") instanceof List<?> role && "slave".equals(role.get(0))) {
                        ok &= "connected".equals(role.get(3));
                    }
                    views.add(view((String) resp.call("CLUSTER", "NODES")));
                }
            }
            if (ok && views.size() == 1) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("the cluster did not reach cluster_state:ok, seen alike by every node, within"
                        + " 30 s:" + describe());
            }
            RedisServer.sleep(50);
        }
    }

    /**
     * A node's {@code CLUSTER NODES} less what differs from one node to the next (who is "myself", the times of
     * the last ping and pong, the link): each node's id, role, master, config epoch and slots, sorted.
     */
    static String view(String clusterNodes) {
        List<String> nodes = new ArrayList<>();
        for (String line : clusterNodes.split("\n")) {
            String[] fields = line.trim().split(" ");
            if (fields.length < 8) {
                continue;
            }
            String flags = fields[2].replace("myself,", "");
            List<String> kept = new ArrayList<>(List.of(fields[0], flags, fields[3], fields[6]));
            kept.addAll(Arrays.asList(fields).subList(8, fields.length));
            nodes.add(String.join(" ", kept));
        }
        Collections.sort(nodes);
        return String.join("\n", nodes);
    }

    /**
     * What every node says of the cluster ({@code CLUSTER NODES}) and the end of its log: the message of a
     * test that waited in vain for the cluster to change.
     */
    public String describe() {
        StringBuilder out = new StringBuilder();
        for (RedisServer node : nodes) {
            out.append("\n--- node on port ").append(node.port());
            if (!node.isAlive()) {
                out.append(" (dead)");
            } else {
                try (Resp resp = node.connect()) {
                    out.append("\n").append(resp.call("CLUSTER", "NODES"));
                } catch (IOException e) {
                    out.append("\n(no answer: ").append(e.getMessage()).append(")");
                }
            }
            out.append("\n").append(node.logTail(15));
        }
        return out.toString();
    }

    public List<RedisServer> nodes() {
        return nodes;
    }

    /** {@code redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...}. */
    public String uri() {
        return "redis-cluster://" + nodes.stream().map(n -> "127.0.0.1:" + n.port()).collect(Collectors.joining(","));
    }

    /** {@code rediss-cluster://127.0.0.1:PORT,...}: the TLS ports of a cluster {@link #startTls started} so. */
    public String tlsUri() {
        return "rediss-cluster://" + nodes.stream().map(n -> n.tlsUri().substring("rediss://".length()))
                .collect(Collectors.joining(","));
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
