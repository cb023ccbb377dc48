package dev.sluice.server.http;

import io.vertx.core.VertxOptions;

/**
 * How the servers' event loops run: {@code -Dsluice.event-loops=N} of them, by default one per core (Vert.x's
 * own default is two per core; a decision never blocks, so more loops than cores only add switches between
 * them), on Linux's epoll where Netty's native transport loads, else on Java NIO.
 */
final class EventLoops {
    private EventLoops() {
    }

    static VertxOptions options() {
        int loops = Integer.getInteger("sluice.event-loops", Runtime.getRuntime().availableProcessors());
        return new VertxOptions().setEventLoopPoolSize(Math.max(1, loops)).setPreferNativeTransport(true);
    }
}
