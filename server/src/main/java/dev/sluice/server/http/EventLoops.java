package dev.sluice.server.http;

import io.vertx.core.AbstractVerticle;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpServer;

import java.util.concurrent.CompletableFuture;
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
 * hands each new connection to the next server in turn.
 */
final class EventLoops {
    private static final long START_SECONDS = 30;

    private EventLoops() {
    }

    static VertxOptions options() {
        return new VertxOptions().setEventLoopPoolSize(count()).setPreferNativeTransport(true);
    }

    /** The number of event loops, and so of servers. */
    static int count() {
        return Math.max(1, Integer.getInteger("sluice.event-loops", Runtime.getRuntime().availableProcessors()));
    }

    /**
     * Starts {@code servers} servers on {@code host:port}, one per event loop (given as many loops), each made by
     * {@code newServer} on its own loop, so that what it makes, an HTTP client say, works on that loop too. They
     * share one socket (port 0: one free port for all).
     *
     * @return the first server, whose {@link HttpServer#actualPort()} is the port
     */
    static HttpServer listen(Vertx vertx, int servers, String host, int port, Supplier<HttpServer> newServer)
            throws Exception {
        // Vert.x gives each server asking for port 0 a port of its own, and one random port to all the servers
        // asking for the same negative one
        int shared = port == 0 ? -1 : port;
        HttpServer first = listenOnNextLoop(vertx, host, shared, newServer);
        for (int i = 1; i < servers; i++) {
            listenOnNextLoop(vertx, host, shared, newServer);
        }
        return first;
    }

    /**
     * Each deployment gets a context of its own, on the next event loop. The deployment fails, and so does
     * this, if making the server throws or it cannot listen.
     */
    private static HttpServer listenOnNextLoop(Vertx vertx, String host, int port, Supplier<HttpServer> newServer)
            throws Exception {
        CompletableFuture<HttpServer> listening = new CompletableFuture<>();
        vertx.deployVerticle(new AbstractVerticle() {
            @Override
            public void start(Promise<Void> started) {
                newServer.get().listen(port, host).onSuccess(listening::complete).<Void>mapEmpty().onComplete(started);
            }
        }).toCompletionStage().toCompletableFuture().get(START_SECONDS, TimeUnit.SECONDS);
        return listening.join();
    }
}
