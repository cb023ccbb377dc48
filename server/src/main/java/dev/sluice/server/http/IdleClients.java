package dev.sluice.server.http;

import io.vertx.core.Context;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.net.impl.ConnectionBase;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.concurrent.TimeUnit;

/**
 * Closes a client's connection to the gateway or the API that carries no request for {@code timeout}: one kept alive
 * after its answer and never used again (nginx's {@code keepalive_timeout}), or one whose request head never ends (its
 * {@code client_header_timeout}). Before, such a connection was held for good, and a client that opened many and
 * sent nothing, or a head a byte at a time, held as many (found by trying the gateway).
 *
 * <p>A request being handled is never cut here, however long it takes: while it is decided, held for its turn,
 * forwarded or answered, its own bounds apply (the store's timeout, {@code max_delay}, the upstream timeout, the 408
 * of a body that stops coming). That is why this is not Vert.x's idle timeout, which counts the bytes moved: it
 * would cut a request held for its turn, or one waiting on a slow upstream, neither of which moves a byte.
 *
 * <p>How: each server (one per event loop) keeps its connections here, touched on its loop only. A request marks its
 * connection busy with it; a scan every {@link #SCANS} th of the timeout takes a connection whose last request is
 * answered (or that never had one) as idle since the first scan that saw it so, and closes it once idle for the
 * timeout, cut off at once (a client that reads nothing would hold a graceful close open). So a connection goes
 * between the timeout and a {@link #SCANS} th more after its last answer, or after it was made when no head came
 * whole. An answer is over once its last byte is handed to the connection, whether or not the client has read it,
 * and a request answered while its body still comes (a 429 reading the rest to drop it) counts as answered. One
 * timer a loop, not one a connection; a connection leaves when it closes.
 */
final class IdleClients {
    /** Scans a timeout: a connection may stay idle up to 1/SCANS of the timeout beyond it. */
    static final int SCANS = 4;

    private final long timeoutNanos;
    private final long periodNanos;
    private final HashMap<HttpConnection, Client> clients = new HashMap<>();
    /** The loop these connections are on. */
    private final Context loop;
    /** How many connections {@link #clients} holds, for {@link Draining} to read from another thread. */
    private volatile int open;
    /** Set on the loop once the server drains ({@link #drain}). */
    private boolean draining;

    /**
     * One connection: its last request, how many scans in a row have seen it idle (answered, or no head whole yet),
     * and when the first of them ran.
     */
    private static final class Client {
        HttpServerRequest request;
        int idleScans;
        long idleSince;
    }

    /** Watches the connections of the server being made on the current event loop. */
    IdleClients(long timeoutMs) {
        long periodMs = Math.max(1, timeoutMs / SCANS);
        this.timeoutNanos = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        this.periodNanos = TimeUnit.MILLISECONDS.toNanos(periodMs);
        this.loop = Vertx.currentContext();
        loop.owner().setPeriodic(periodMs, scan -> scan());
    }

    /** The server's connection handler: a connection is idle from the moment it is made. */
    void connected(HttpConnection connection) {
        clients.put(connection, new Client());
        open = clients.size();
        ((ConnectionBase) connection).closeFuture().onComplete(closed -> {
            clients.remove(connection);
            open = clients.size();
        });
    }

    /** {@code handler}, each request marking its connection busy until it is answered. */
    Handler<HttpServerRequest> watching(Handler<HttpServerRequest> handler) {
        return request -> {
            Client client = clients.get(request.connection());
            if (client != null) {
                client.request = request;
                client.idleScans = 0;
            }
            if (draining) { // its answer is the connection's last: the client opens its next elsewhere
                request.response().putHeader("Connection", "close");
            }
            handler.handle(request);
        };
    }

    /** How many connections are open on this loop; read from any thread. */
    int open() {
        return open;
    }

    /**
     * Starts draining ({@link Draining}): from now on each connection is closed as soon as it carries no request,
     * looked for every {@link Draining#SCAN_MS} ms. Called from any thread; runs on the loop.
     */
    void drain() {
        loop.runOnContext(started -> {
            draining = true;
            closeAnswered();
            loop.owner().setPeriodic(Draining.SCAN_MS, scan -> closeAnswered());
        });
    }

    /**
     * Closes each connection whose last request is answered and has come whole, or that never had one. What is left
     * of an answered request (a body still coming, or the end of one the gateway paused and never needed) is read
     * and dropped meanwhile, as nginx's lingering close does, so that the close is a FIN and not a reset.
     */
    private void closeAnswered() {
        ArrayList<HttpConnection> done = new ArrayList<>();
        clients.forEach((connection, client) -> {
            if (!busy(client, true)) {
                done.add(connection);
            } else if (client.request.response().ended()) {
                Forwarder.dropRest(client.request);
            }
        });
        for (HttpConnection connection : done) { // closed out of the loop: a close may tell closeFuture at once
            connection.close(); // its answer's last bytes go first
        }
    }

    /**
     * Whether {@code client}'s request is being handled: decided, held, forwarded, its answer not over. Its scan for
     * being idle takes a request answered while its body still comes (a 429 reading the rest to drop it) as over;
     * a drain does not ({@code whole}): closed then, the client's writes would meet a reset that could lose its answer
     * (a review saw a broken pipe mid-upload).
     */
    private static boolean busy(Client client, boolean whole) {
        HttpServerRequest request = client.request;
        if (request == null || request.response().closed()) {
            return false;
        }
        return !request.response().ended() || whole && !request.isEnded();
    }

    /**
     * Closes what has been idle for the timeout: seen idle by {@link #SCANS} + 1 scans in a row, the first at or after
     * its last answer (or its making), and the timeout passed since, give or take half a scan for the timer's
     * jitter. Counted in scans, not by the clock alone: the scan due one timeout after the first runs a few
     * microseconds early about half the time, and the close slipped a whole scan (a review found it). The time is
     * checked too, for scans that run late and then catch up.
     */
    private void scan() {
        long now = System.nanoTime();
        ArrayList<HttpConnection> idle = new ArrayList<>();
        clients.forEach((connection, client) -> {
            if (busy(client, false)) {
                client.idleScans = 0; // being handled: its own bounds apply
            } else if (client.idleScans++ == 0) {
                client.idleSince = now;
            } else if (client.idleScans > SCANS && now - client.idleSince >= timeoutNanos - periodNanos / 2) {
                idle.add(connection);
            }
        });
        for (HttpConnection connection : idle) { // closed out of the loop: a close may tell closeFuture at once
            clients.remove(connection);
            Forwarder.cutOff(connection); // an answer the client never read must not hold it
        }
    }
}
