package dev.sluice.server.http;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.timeout.IdleStateHandler;
import io.vertx.core.impl.VertxInternal;

import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One event loop's connections to the upstream: Netty channels on that loop, kept open from one request to the
 * next, at most {@link #MOST} at once (a request beyond waits for one to be given back, in turn). Confined to its
 * loop: every method runs on it, so nothing here is shared or locked.
 *
 * <p>Each connection's pipeline: TLS for an {@code https} upstream (the JDK's trusted certificates, the host name
 * checked), HTTP/1.1, a watch on silence ({@link IdleStateHandler}: neither a byte read nor written for the
 * upstream timeout) and the {@link Forwarder.Relay} that hands what is read to the exchange the connection
 * carries. A connection left idle for the upstream timeout is closed.
 */
final class UpstreamConnections {
    /** The most connections a loop opens to the upstream. */
    static final int MOST = 512;

    /** Waits for a connection: given one (used before, or new), or told why there is none. */
    interface Lease {
        void granted(Channel channel, boolean reused);

        void failed(Throwable cause);
    }

    private final Bootstrap bootstrap;
    private final EventLoop loop;
    private final String host;
    private final int port;
    private final long timeoutMs;
    private final int most;
    private final ArrayDeque<Channel> idle = new ArrayDeque<>();
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    private int open;

    /**
     * @param tls        for an {@code https} upstream, else null
     * @param timeoutMs  how long a connection may stay silent, in an exchange or idle, and how long a request waits
     *                   for a connection when all are taken
     */
    UpstreamConnections(VertxInternal vertx, EventLoop loop, String host, int port, SslContext tls, long timeoutMs,
                        int connectTimeoutMs) {
        this(vertx, loop, host, port, tls, timeoutMs, connectTimeoutMs, MOST);
    }

    /** As above, with at most {@code most} connections (for tests). */
    UpstreamConnections(VertxInternal vertx, EventLoop loop, String host, int port, SslContext tls, long timeoutMs,
                        int connectTimeoutMs, int most) {
        this.most = most;
        this.loop = loop;
        this.host = host;
        this.port = port;
        this.timeoutMs = timeoutMs;
        this.bootstrap = new Bootstrap().group(loop).channelFactory(vertx.transport().channelFactory(false))
                .resolver(new AddressesInTurn(vertx.nettyAddressResolverGroup()))
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, connectTimeoutMs)
                .handler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel channel) {
                        if (tls != null) {
                            SslHandler handler = tls.newHandler(channel.alloc(), host, port);
                            SSLEngine engine = handler.engine();
                            SSLParameters parameters = engine.getSSLParameters();
                            parameters.setEndpointIdentificationAlgorithm("HTTPS");
                            engine.setSSLParameters(parameters);
                            channel.pipeline().addLast(handler);
                        }
                        channel.pipeline().addLast(new HttpClientCodec(),
                                new IdleStateHandler(0, 0, timeoutMs, TimeUnit.MILLISECONDS), new Forwarder.Relay());
                    }
                });
    }

    /** How long a connection may stay silent, and a request wait for one. */
    long timeoutMs() {
        return timeoutMs;
    }

    /**
     * Grants {@code lease} a connection: an idle one, a new one, or the next one given back; one that waits longer
     * than the timeout for it fails with a {@link TimeoutException}.
     */
    void lease(Lease lease) {
        for (Channel channel; (channel = idle.pollLast()) != null; ) { // the one used last: the warmest
            if (channel.isActive()) {
                lease.granted(channel, true);
                return;
            }
        }
        if (open < most) {
            connect(lease);
            return;
        }
        Waiting waits = new Waiting(lease);
        waits.deadline = loop.schedule(() -> {
            if (waiting.remove(waits)) {
                lease.failed(new TimeoutException("no connection to the upstream came free in time"));
            }
        }, timeoutMs, TimeUnit.MILLISECONDS);
        waiting.add(waits);
    }

    /** A lease no longer wanted (its client left): out of the line, if it waits in it. */
    void cancel(Lease lease) {
        for (Iterator<Waiting> line = waiting.iterator(); line.hasNext(); ) {
            Waiting waits = line.next();
            if (waits.lease == lease) {
                line.remove();
                waits.deadline.cancel(false);
                return;
            }
        }
    }

    /** The next lease in line, its deadline cancelled; null if none waits. */
    private Lease next() {
        Waiting waits = waiting.poll();
        if (waits == null) {
            return null;
        }
        waits.deadline.cancel(false); // else it would keep the lease, and what it holds, for the whole timeout
        return waits.lease;
    }

    /** A lease in line for a connection, and the timer that ends its wait. */
    private static final class Waiting {
        final Lease lease;
        ScheduledFuture<?> deadline;

        Waiting(Lease lease) {
            this.lease = lease;
        }
    }

    /**
     * Takes back a connection whose exchange is over, whole, and may carry another. A request waiting for one is
     * granted it once the read that ended the answer is over, not within it: bytes an upstream sent past its answer's
     * length, read with it, then find no exchange and close the connection (an answer to nothing), as nginx drops
     * such a connection, where they had been taken for the waiting request's answer (a review found it).
     */
    void giveBack(Channel channel) {
        if (!channel.isActive()) {
            return; // closed meanwhile: as it closed, its place was freed and given to whoever waited
        }
        if (waiting.isEmpty()) {
            idle.addLast(channel);
            return;
        }
        try {
            loop.execute(() -> {
                if (!channel.isActive()) {
                    return; // as above: its place went to whoever waited
                }
                Lease next = next();
                if (next != null) {
                    next.granted(channel, true);
                } else {
                    idle.addLast(channel);
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            channel.close(); // the loop is shutting down: nothing will wait on it
        }
    }

    private void connect(Lease lease) {
        open++;
        Place place = new Place();
        ChannelFuture connecting;
        try {
            connecting = bootstrap.connect(host, port);
        } catch (RuntimeException e) {
            place.free(null);
            lease.failed(e);
            return;
        }
        Channel channel = connecting.channel();
        // A channel Netty could not even make (no file descriptor left) is never closed, and its failure is told on
        // another thread: the place is freed by whichever comes first, on this loop.
        channel.closeFuture().addListener(closed -> onLoop(() -> place.free(channel)));
        connecting.addListener(connected -> onLoop(() -> {
            if (!connected.isSuccess()) {
                place.free(channel);
                lease.failed(connected.cause());
                return;
            }
            SslHandler tls = channel.pipeline().get(SslHandler.class);
            if (tls == null) {
                lease.granted(channel, false);
                return;
            }
            tls.handshakeFuture().addListener(shaken -> onLoop(() -> {
                if (shaken.isSuccess()) {
                    lease.granted(channel, false);
                } else {
                    channel.close();
                    lease.failed(shaken.cause());
                }
            }));
        }));
    }

    private void onLoop(Runnable task) {
        if (loop.inEventLoop()) {
            task.run();
        } else {
            try {
                loop.execute(task);
            } catch (RejectedExecutionException e) {
                // the gateway is closing: nothing is left to serve
            }
        }
    }

    /** One connection's place among the {@link #MOST}: freed once, when it closes or fails to open. */
    private final class Place {
        private boolean freed;

        void free(Channel channel) {
            if (freed) {
                return;
            }
            freed = true;
            open--;
            if (channel != null) {
                idle.remove(channel);
            }
            Lease next = next();
            if (next != null) {
                connect(next);
            }
        }
    }
}
