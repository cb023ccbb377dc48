package dev.sluice.server.envoy;

import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerStreamTracer;
import io.grpc.Status;
import io.grpc.netty.shaded.io.netty.channel.Channel;

import java.net.SocketAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Bounds what the calls of Envoy's rate limit service hold in gRPC, over every connection: the calls open, at most
 * {@link #MOST_CALLS_IN_ALL}, and the bytes of messages begun and not yet whole, at most {@link #MOST_A_CONNECTION}
 * on one connection and {@link #MOST_IN_ALL} over every connection. A connection past its bound is cut off (a
 * reset); past a bound in all, the connection holding the most is.
 *
 * <p>Why the calls: a connection has at most {@link EnvoyRateLimitServer#MOST_CALLS_PER_CONNECTION} calls open, and a
 * call that sends its headers and nothing more holds about 1.5 KB of heap until the connection goes; 200 connections
 * of a thousand such calls ran a server of 256 MB out of heap in six seconds (a review found it). Envoy's calls are
 * answered in microseconds to milliseconds: twenty thousand open at once is far past what its traffic holds.
 *
 * <p>Why the messages: gRPC keeps what a call's message has sent so far, and gives the client the window to send more as soon as
 * it has kept it; a message is whole at up to {@link EnvoyRateLimitServer#MOST_BYTES_A_MESSAGE}, and a connection
 * has up to {@link EnvoyRateLimitServer#MOST_CALLS_PER_CONNECTION} calls. A client sending all of such messages but
 * their last byte held 49 MB of direct memory a connection, and a few connections took a server to 920 MB (a review
 * found it); the bounds of a message and of the calls allowed a gigabyte a connection. Envoy sends each message
 * whole, of a few hundred bytes: a connection of Envoy's holds a few kilobytes in messages begun, for the moment
 * their frames take to come.
 *
 * <p>How: gRPC tells a call's tracer that it has begun ({@code serverCallStarted}), the bytes of a message as it reads them ({@code inboundWireSize}), the message
 * once whole ({@code inboundMessageRead}), and the call's end ({@code streamClosed}), on the connection's event loop;
 * the call's connection is known by its two addresses, which {@link GrpcTransport} registers as it accepts it
 * ({@link #connected}).
 */
final class CallsHeld extends ServerStreamTracer.Factory {
    /** The most bytes of messages begun on one connection: four of the largest messages. */
    static final long MOST_A_CONNECTION = 4L * EnvoyRateLimitServer.MOST_BYTES_A_MESSAGE;
    /** The most over every connection. */
    static final long MOST_IN_ALL = 64L << 20;
    /** The most calls open over every connection. */
    static final long MOST_CALLS_IN_ALL = 20_000;

    /**
     * The connections by their two ends: a client may use one address and port toward two addresses of a server
     * listening on every interface, and by the client's end alone, one connection's entry stood for the other's (a
     * review found the bound passed so).
     */
    private final ConcurrentHashMap<Ends, Held> connections = new ConcurrentHashMap<>();
    private final AtomicLong inAll = new AtomicLong();
    private final AtomicLong callsInAll = new AtomicLong();

    /** A connection's two ends, as the channel and gRPC's transport attributes name them. */
    private record Ends(SocketAddress local, SocketAddress remote) {
    }

    /** What one connection holds, changed on its event loop; and whether it is closed or being cut off. */
    private static final class Held {
        final Channel channel;
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong calls = new AtomicLong();
        volatile boolean closed;

        Held(Channel channel) {
            this.channel = channel;
        }
    }

    /** A connection just accepted: its calls' messages are counted from now, until it closes. */
    void connected(Channel connection) {
        Held held = new Held(connection);
        Ends ends = new Ends(connection.localAddress(), connection.remoteAddress());
        connections.put(ends, held);
        connection.closeFuture().addListener(closed -> {
            connections.remove(ends, held);
            held.closed = true; // its calls' ends, which may come after, count nothing more
            inAll.addAndGet(-held.bytes.getAndSet(0)); // 0 if cut off: taken away then
            callsInAll.addAndGet(-held.calls.getAndSet(0));
        });
    }

    @Override
    public ServerStreamTracer newServerStreamTracer(String fullMethodName, Metadata headers) {
        return new Call();
    }

    /** Counts one call's message begun. */
    private final class Call extends ServerStreamTracer {
        private Held held;
        private long begun;

        /** Whether this call is counted among its connection's open calls. */
        private boolean open;

        @Override
        public void serverCallStarted(ServerCallInfo<?, ?> callInfo) {
            held = connections.get(new Ends(callInfo.getAttributes().get(Grpc.TRANSPORT_ATTR_LOCAL_ADDR),
                    callInfo.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR)));
            if (held == null || held.closed) {
                return;
            }
            open = true;
            held.calls.incrementAndGet();
            if (callsInAll.incrementAndGet() > MOST_CALLS_IN_ALL) {
                cutTheMost(callsInAll, MOST_CALLS_IN_ALL, one -> one.calls.get());
            }
            add(begun);
        }

        @Override
        public void inboundWireSize(long bytes) {
            begun += bytes;
            add(bytes);
        }

        @Override
        public void inboundMessageRead(int seqNo, long optionalWireSize, long optionalUncompressedSize) {
            add(-begun); // whole: handed on, no longer held
            begun = 0;
        }

        @Override
        public void streamClosed(Status status) {
            add(-begun);
            begun = 0;
            if (open && !held.closed) { // closed: its calls were taken away with it
                held.calls.decrementAndGet();
                callsInAll.decrementAndGet();
            }
            open = false;
        }

        private void add(long bytes) {
            if (held == null || held.closed || bytes == 0) {
                return;
            }
            long connection = held.bytes.addAndGet(bytes);
            long all = inAll.addAndGet(bytes);
            if (bytes > 0 && connection > MOST_A_CONNECTION) {
                cutOff(held);
            } else if (bytes > 0 && all > MOST_IN_ALL) {
                cutTheMost(inAll, MOST_IN_ALL, one -> one.bytes.get());
            }
        }
    }

    /**
     * Cuts off the connection holding the most by {@code measure}, if {@code total} is still past {@code most}: one
     * caller at a time, so that two event loops passing the bound at once cut one connection, not two (the first
     * cut takes what it held from the total at once; a test found two cut).
     */
    private synchronized void cutTheMost(AtomicLong total, long most, java.util.function.ToLongFunction<Held> measure) {
        if (total.get() > most) {
            connections.values().stream().filter(one -> !one.closed)
                    .max(java.util.Comparator.comparingLong(measure)).ifPresent(this::cutOff);
        }
    }

    /**
     * Cuts {@code held}'s connection off ({@link UnreadAnswers#cutOff(Channel)}), once the call being read has returned:
     * a close from inside gRPC's reading would run into it. What it holds counts no more from now: the connection is
     * as good as gone, and the bytes another connection reads meanwhile must not cut a second one (a test found two
     * cut, the first one's bytes falling call by call as it closed).
     */
    private void cutOff(Held held) {
        if (held.closed) {
            return;
        }
        held.closed = true;
        inAll.addAndGet(-held.bytes.getAndSet(0));
        callsInAll.addAndGet(-held.calls.getAndSet(0));
        held.channel.eventLoop().execute(() -> UnreadAnswers.cutOff(held.channel));
    }
}
