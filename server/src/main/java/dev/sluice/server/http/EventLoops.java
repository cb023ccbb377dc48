package dev.sluice.server.http;

import io.netty.channel.EventLoop;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpServer;
import io.vertx.core.impl.ContextInternal;
import io.vertx.core.impl.VertxInternal;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * How the servers' event loops run: {@code -Dsluice.event-loops=N} of them, by default one per core (Vert.x's
 * own default is two per core; a decision never blocks, so more loops than cores only add switches between
 * them), on Linux's epoll where Netty's native transport loads, else on Java NIO.
 *
 * <p>A Vert.x server runs on the one event loop it was started on, however many the instance has: with one
 * server, one loop answered every request and the others stayed idle (seen with {@code top -H} under
 * {@code wrk}). So {@link #listen} starts one server per loop on the same port; Vert.x shares the socket and
 * hands each new connection to the next loop in turn.
 */
public final class EventLoops {
    private static final long START_SECONDS = 30;
    private static final String PROPERTY = "sluice.event-loops";
    /** The most loops one may ask for: beyond it a typo ({@code 100000}) would fail later, as too many open files. */
    private static final int MOST = 1024;

    private EventLoops() {
    }

    static VertxOptions options() {
        return new VertxOptions().setEventLoopPoolSize(count()).setPreferNativeTransport(true);
    }

    /**
     * The number of event loops, and so of servers.
     *
     * @throws IllegalArgumentException naming the property and its value, when it is not a whole number from 1 to
     *                                  {@value #MOST}
     */
    public static int count() {
        String given = System.getProperty(PROPERTY);
        if (given == null) {
            return Runtime.getRuntime().availableProcessors();
        }
        if (given.matches("[0-9]{1,4}")) { // ASCII digits: Integer.parseInt also reads "+4" and "٤"
            int count = Integer.parseInt(given);
            if (count >= 1 && count <= MOST) {
                return count;
            }
        }
        throw new IllegalArgumentException("-D" + PROPERTY + ": expected a whole number of event loops from 1 to "
                + MOST + ", got '" + given + "'");
    }

    /**
     * Starts {@code servers} servers on {@code host:port}, one per event loop (given as many loops), each made by
     * {@code newServer} on its own loop, so that what it makes, an HTTP client say, works on that loop too. They
     * share one socket (port 0: one free port for all).
     *
     * <p>Each server is started on a context made for its loop, named: a bug pinned in EventLoopsTest, a
     * deployment a server took the next loop in turn, and so did whatever Vert.x made in between (an HTTP client
     * takes one for its pool's cleaner), so the gateway's two servers, each making a client, shared one loop of
     * two, and the other stayed idle.
     *
     * @return the first server, whose {@link HttpServer#actualPort()} is the port
     */
    static HttpServer listen(Vertx vertx, int servers, String host, int port, Supplier<HttpServer> newServer)
            throws Exception {
        // Vert.x gives each server asking for port 0 a port of its own, and one random port to all the servers
        // asking for the same negative one
        int shared = port == 0 ? -1 : port;
        List<EventLoop> loops = new ArrayList<>();
        vertx.nettyEventLoopGroup().forEach(loop -> loops.add((EventLoop) loop));
        HttpServer first = listenOn(vertx, loops.get(0), host, shared, newServer);
        for (int i = 1; i < servers; i++) {
            listenOn(vertx, loops.get(i % loops.size()), host, shared, newServer);
        }
        return first;
    }

    /** Makes a server on {@code loop} and has it listen; fails if making it throws or it cannot listen. */
    private static HttpServer listenOn(Vertx vertx, EventLoop loop, String host, int port, Supplier<HttpServer> newServer)
            throws Exception {
        VertxInternal internal = (VertxInternal) vertx;
        ContextInternal context = internal.createEventLoopContext(loop, internal.getWorkerPool(),
                Thread.currentThread().getContextClassLoader());
        CompletableFuture<HttpServer> listening = new CompletableFuture<>();
        context.runOnContext(started -> {
            try {
                newServer.get().listen(port, host).onComplete(listened -> {
                    if (listened.succeeded()) {
                        listening.complete(listened.result());
                    } else {
                        listening.completeExceptionally(listened.cause());
                    }
                });
            } catch (RuntimeException e) {
                listening.completeExceptionally(e);
            }
        });
        try {
            return listening.get(START_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }
}
