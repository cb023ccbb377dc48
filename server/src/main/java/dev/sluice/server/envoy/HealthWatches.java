package dev.sluice.server.envoy;

import io.grpc.ForwardingServerCall.SimpleForwardingServerCall;
import io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.health.v1.HealthGrpc;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Keeps the health service's open {@code Watch} calls, to end them when the server closes.
 *
 * <p>Why: a {@code Watch} (Kubernetes' gRPC probes and gRPC clients' health checking open one and keep it) is a
 * stream that only its client ends. gRPC's {@code shutdown()} lets open calls finish, so one open watch held every
 * shutdown for the full wait before {@code shutdownNow()}, five seconds. The watchers have heard
 * {@code NOT_SERVING} by then ({@code enterTerminalState()}); ending their calls with {@code UNAVAILABLE} is what
 * gRPC's own {@code shutdownNow()} would say to them, only without the wait.
 *
 * <p>A call's sends and its close are made under the call's own lock: gRPC's {@code ServerCall} is not safe for two
 * threads at once, and a watch that starts as the server closes sends its first status on the connection's event
 * loop while {@link #endAll()} runs on the closing thread.
 */
final class HealthWatches implements ServerInterceptor {
    private final Set<Watch<?, ?>> open = ConcurrentHashMap.newKeySet();
    /** Set by {@link #endAll}: a watch that starts after it (a stream accepted as the server closed) ends at once. */
    private volatile boolean ending;

    @Override
    public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers,
                                                       ServerCallHandler<Q, A> next) {
        if (!call.getMethodDescriptor().getFullMethodName().equals(HealthGrpc.getWatchMethod().getFullMethodName())) {
            return next.startCall(call, headers);
        }
        Watch<Q, A> watch = new Watch<>(call);
        open.add(watch);
        ServerCall.Listener<Q> listener = next.startCall(watch, headers);
        if (ending) { // endAll ran before this watch was added (a review found it left open for the whole wait)
            open.remove(watch);
            watch.end(SHUTTING_DOWN);
        }
        return new SimpleForwardingServerCallListener<>(listener) {
            @Override
            public void onCancel() {
                open.remove(watch);
                super.onCancel();
            }

            @Override
            public void onComplete() {
                open.remove(watch);
                super.onComplete();
            }
        };
    }

    /** Ends every open watch with {@code UNAVAILABLE}. */
    void endAll() {
        ending = true;
        for (Watch<?, ?> watch : open) {
            watch.end(SHUTTING_DOWN);
            open.remove(watch);
        }
    }

    private static final Status SHUTTING_DOWN = Status.UNAVAILABLE.withDescription("the server is shutting down");

    /** How many watches are open (for tests). */
    int open() {
        return open.size();
    }

    private static final class Watch<Q, A> extends SimpleForwardingServerCall<Q, A> {
        private boolean closed;

        Watch(ServerCall<Q, A> call) {
            super(call);
        }

        @Override
        public synchronized void sendHeaders(Metadata headers) {
            if (!closed) {
                super.sendHeaders(headers);
            }
        }

        @Override
        public synchronized void sendMessage(A message) {
            if (!closed) {
                super.sendMessage(message);
            }
        }

        @Override
        public synchronized void close(Status status, Metadata trailers) {
            if (!closed) {
                closed = true;
                super.close(status, trailers);
            }
        }

        synchronized void end(Status status) {
            close(status, new Metadata());
        }
    }
}
