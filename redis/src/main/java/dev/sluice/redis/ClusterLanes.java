package dev.sluice.redis;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.SslOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.event.ClusterTopologyChangedEvent;
import io.lettuce.core.cluster.models.partitions.Partitions;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.NettyCustomizer;
import io.netty.channel.Channel;
import io.netty.handler.flush.FlushConsolidationHandler;
import io.netty.util.Timer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A Redis Cluster store's connections: Lettuce's, which follow the slots (a slot moving answers {@code ASK}, then
 * {@code MOVED}: RedisClusterReshardingTest) and the failovers. One connection per I/O thread of the client (as many
 * as the machine has cores, at least two), each flushing the commands of its callers together, once per turn of its
 * event loop, so Redis reads them as from a pipeline; with one connection only, its event loop and Redis took turns,
 * each idle while the other worked (measured: bench/README.md).
 *
 * <p>The topology is refreshed every 5 s, on every adaptive trigger Lettuce has ({@code MOVED}, {@code ASK},
 * reconnects), and when the store asks ({@link #refreshTopology}, as a breaker opens). Commands are refused at once
 * while a node's connection is down, and every command has the store's timeout, on the store's timer.
 */
final class ClusterLanes implements AutoCloseable {
    private final RedisClusterClient client;
    private final ClientResources resources;
    private final List<Lane> lanes;

    /** One Lettuce connection to a Redis Cluster and its commands. */
    private record Lane(StatefulRedisClusterConnection<String, String> connection,
                        RedisScriptingAsyncCommands<String, String> scripting) {
        static Lane of(StatefulRedisClusterConnection<String, String> connection) {
            return new Lane(connection, connection.async());
        }
    }

    private ClusterLanes(RedisClusterClient client, ClientResources resources, List<Lane> lanes) {
        this.client = client;
        this.resources = resources;
        this.lanes = List.copyOf(lanes);
    }

    /**
     * Connects to the Cluster of {@code seeds}, one connection per I/O thread, and primes them ({@link ClusterPrimer}).
     * If anything fails, the connections made, the client and its threads are stopped before the failure goes on;
     * {@code timer} is the caller's, which stops it.
     *
     * @param trust the certificates of a TLS Cluster, or null
     * @throws RedisConnectionException when no node can be reached, with a TLS refusal's reason if there was one
     */
    static ClusterLanes open(List<RedisURI> seeds, Duration timeout, TlsTrust trust, Timer timer) {
        TimeoutOptions timeouts = TimeoutOptions.enabled(timeout);
        SocketOptions socket = SocketOptions.builder().connectTimeout(Duration.ofSeconds(2)).build();
        List<Lane> lanes = new ArrayList<>();
        ClientResources resources = null;
        RedisClusterClient client = null;
        try {
            resources = ClientResources.builder().timer(timer).nettyCustomizer(new NettyCustomizer() {
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
            client = RedisClusterClient.create(resources, seeds);
            ClusterClientOptions.Builder options = ClusterClientOptions.builder();
            if (trust != null) {
                options.sslOptions(SslOptions.builder().jdkSslProvider().trustManager(trust.managers()).build());
            }
            client.setOptions(options.timeoutOptions(timeouts).socketOptions(socket)
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                    .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                            .enablePeriodicRefresh(Duration.ofSeconds(5)).enableAllAdaptiveRefreshTriggers().build())
                    .build());
            for (int i = 0; i < resources.ioThreadPoolSize(); i++) {
                lanes.add(Lane.of(client.connect(ReplyCodec.INSTANCE)));
            }
            List<StatefulRedisClusterConnection<String, String>> connections =
                    lanes.stream().map(Lane::connection).toList();
            // before the first decision, and for the masters each topology change brings (ClusterPrimer says why)
            ClusterPrimer.prime(connections, client.getPartitions());
            resources.eventBus().get().subscribe(event -> {
                if (event instanceof ClusterTopologyChangedEvent changed) {
                    ClusterPrimer.connect(connections, changed.after());
                }
            });
        } catch (RuntimeException | Error e) {
            try {
                new ClusterLanes(client, resources, lanes).close();
            } catch (RuntimeException | Error closing) {
                e.addSuppressed(closing);
            }
            String tls = TlsTrust.refusal(e);
            if (tls != null) {
                throw new RedisConnectionException("Unable to connect: " + tls);
            }
            throw e;
        }
        return new ClusterLanes(client, resources, lanes);
    }

    /** How many connections the callers share. */
    int size() {
        return lanes.size();
    }

    /** The Cluster's slots and their masters, as the client last refreshed them. */
    Partitions partitions() {
        return client.getPartitions();
    }

    /** Asks the Cluster's topology again, at once, without waiting for the answer. */
    void refreshTopology() {
        client.refreshPartitionsAsync();
    }

    /**
     * One call of {@code script} on connection {@code lane}, by its SHA-1, sent whole when the node answers
     * {@code NOSCRIPT} ({@code reloaded} is told). Bounded by Lettuce's timeout once the node's connection is made.
     */
    CompletableFuture<String> evaluate(int lane, RuleScript.Script script, String[] keys, String[] arguments,
                                       Runnable reloaded) {
        RedisScriptingAsyncCommands<String, String> scripting = lanes.get(lane).scripting();
        return scripting.<String>evalsha(script.sha(), ScriptOutputType.VALUE, keys, arguments)
                .handle((answer, failure) -> {
                    if (failure == null) {
                        return CompletableFuture.completedFuture(answer);
                    }
                    if (failure instanceof RedisNoScriptException || failure.getCause() instanceof RedisNoScriptException) {
                        reloaded.run();
                        return scripting.<String>eval(script.text(), ScriptOutputType.VALUE, keys, arguments)
                                .toCompletableFuture();
                    }
                    return CompletableFuture.<String>failedFuture(failure);
                }).thenCompose(stage -> stage).toCompletableFuture();
    }

    /** Deletes {@code redisKey} on connection {@code lane}, waiting for the answer (Lettuce's timeout bounds it). */
    void delete(int lane, String redisKey) {
        lanes.get(lane).connection().sync().del(redisKey);
    }

    /** A {@code PING} on connection {@code lane}: to the node of a default slot, or to {@code nodeId}'s if not null. */
    CompletableFuture<String> ping(int lane, String nodeId) {
        StatefulRedisClusterConnection<String, String> connection = lanes.get(lane).connection();
        return nodeId == null ? connection.async().ping().toCompletableFuture()
                : connection.getConnectionAsync(nodeId).thenCompose(node -> node.async().ping()).toCompletableFuture();
    }

    /** Closes the connections, then shuts down the client and its threads (not the timer: the store's). */
    @Override
    public void close() {
        for (Lane lane : lanes) {
            lane.connection().close();
        }
        if (client != null) {
            client.shutdown();
        }
        if (resources != null) {
            resources.shutdown();
        }
    }
}
