package dev.sluice.server.envoy;

import io.grpc.Attributes;
import io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerTransportFilter;
import io.grpc.Status;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * At most {@code most} calls open at once on one connection, whether or not its client has acknowledged the HTTP/2
 * SETTINGS that say so. Netty applies the server's {@code SETTINGS_MAX_CONCURRENT_STREAMS} only once the client
 * acknowledges it, as HTTP/2 allows; a client that never does (found by attacking the port) opened 122,000 calls on
 * one connection, the thousand of the setting notwithstanding. A call past the bound is ended at once with
 * {@code RESOURCE_EXHAUSTED}, saying why; a client that acknowledged the setting is refused by HTTP/2 before it
 * gets here, so Envoy never sees this.
 *
 * <p>A call is open from its headers until it ends (answered, and the answer sent: an answer that waits for the
 * client's HTTP/2 window keeps its call open) or is cancelled. Each connection's count is an attribute its transport
 * is given when it is ready ({@link #transportReady}), so the count ends with the connection.
 */
final class OpenCalls extends ServerTransportFilter implements ServerInterceptor {
    private static final Attributes.Key<AtomicInteger> OPEN = Attributes.Key.create("sluice.open-calls");

    private final int most;

    OpenCalls(int most) {
        this.most = most;
    }

    @Override
    public Attributes transportReady(Attributes transport) {
        return transport.toBuilder().set(OPEN, new AtomicInteger()).build();
    }

    @Override
    public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
        AtomicInteger open = call.getAttributes().get(OPEN);
        if (open.incrementAndGet() > most) {
            open.decrementAndGet();
            call.close(Status.RESOURCE_EXHAUSTED.withDescription("more than " + most
                    + " calls open on one connection (SETTINGS_MAX_CONCURRENT_STREAMS)"), new Metadata());
            return new ServerCall.Listener<>() {
            };
        }
        ServerCall.Listener<Q> listener;
        try {
            listener = next.startCall(call, headers);
        } catch (RuntimeException | Error e) {
            open.decrementAndGet();
            throw e;
        }
        return new SimpleForwardingServerCallListener<>(listener) {
            @Override
            public void onComplete() {
                open.decrementAndGet();
                super.onComplete();
            }

            @Override
            public void onCancel() {
                open.decrementAndGet();
                super.onCancel();
            }
        };
    }
}
