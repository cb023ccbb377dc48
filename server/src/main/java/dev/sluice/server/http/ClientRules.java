package dev.sluice.server.http;

import dev.sluice.server.ClientConnections;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.net.impl.ConnectionBase;

/**
 * The rules every client of the gateway and of the API is held to, on the server made for one event loop: requests
 * framed one way only and pipelined within bounds ({@link StrictFraming}), a request the decoder cannot read answered
 * with why ({@link ApiServer#malformed}), a connection that carries no request let go ({@link IdleClients}), and the
 * {@code close} option honoured among others ({@link CloseOption}), and no more connections open than the process
 * takes ({@link ClientConnections}: one past them is closed as it comes). One place, so that the two servers cannot drift
 * apart: the API had Vert.x's idle timeout, which cut a request waiting on a slow store (a review found it).
 */
final class ClientRules {
    private ClientRules() {
    }

    /**
     * A server on the current event loop that hands {@code handler} each request its clients may send.
     *
     * @param idleMs   how long a connection may carry no request
     * @param port     the port the server listens on, for the places its clients may take
     * @param draining how the servers of the port stop, this one among them
     */
    static HttpServer server(Vertx vertx, long idleMs, ClientConnections connections, ClientConnections.Port port,
                             Draining draining, Handler<HttpServerRequest> handler) {
        // HTTP/1.1: a client's h2c upgrade request (java.net.http asks for one by default) is answered in HTTP/1.1
        HttpServerOptions options = new HttpServerOptions().setHttp2ClearTextEnabled(false);
        IdleClients idle = new IdleClients(idleMs);
        draining.add(idle);
        return vertx.createHttpServer(options)
                .connectionHandler(connection -> {
                    if (draining.started() || !connections.take(port)) {
                        Forwarder.cutOff(connection);
                        return;
                    }
                    ((ConnectionBase) connection).closeFuture().onComplete(closed -> connections.leave());
                    StrictFraming.install(connection, options, connections);
                    idle.connected(connection);
                })
                .invalidRequestHandler(ApiServer::malformed)
                // a request CloseOption drops unanswered is not the connection's last: idle, not busy
                .requestHandler(CloseOption.honoured(idle.watching(handler)));
    }
}
