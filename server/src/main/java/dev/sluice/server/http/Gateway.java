package dev.sluice.server.http;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.sluice.DurationFormat;
import dev.sluice.server.ClientConnections;
import dev.sluice.server.Drains;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.Verdict;
import dev.sluice.server.VerdictAnswer;
import dev.sluice.server.request.BadRequest;
import io.netty.channel.EventLoop;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.impl.ContextInternal;
import io.vertx.core.impl.VertxInternal;

import java.net.URI;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * {@code sluice gateway}: a reverse proxy that decides every request before it forwards it (docs/server.md).
 *
 * <ul>
 *   <li>Admitted: forwarded, the upstream's answer returned with the rate limit headers added. In delay mode
 *       the request waits on a timer of the event loop first (no thread is held), then goes on.</li>
 *   <li>Rejected: {@code 429} (or the policy's {@code reject_status}) with {@code Retry-After}, the rate limit headers and
 *       {@code {"error":"rate limited","policy":...,"retry_after_ms":...}}; the upstream never sees it.</li>
 *   <li>Shadow policies count and never reject. A malformed cost header is a {@code 400} that names it.</li>
 *   <li>A concurrency policy holds the request's place from its admission until its answer has been sent (or
 *       its connection is gone).</li>
 *   <li>The upstream down (refused, unreachable, closed mid-answer) is a {@code 502}, never a hang: connecting
 *       gives up after {@link #CONNECT_TIMEOUT_MS} ms.</li>
 *   <li>Bodies stream both ways ({@link Forwarder}); the incoming body stays paused while the request is decided
 *       or delayed.</li>
 *   <li>A request whose body could be delimited two ways (an unknown {@code Transfer-Encoding}, one with
 *       {@code Content-Length}) is a 400, and its connection read no further; a client's pipelined requests are read
 *       {@link StrictFraming#MOST_AHEAD} at most ahead of the answers sent, and none while its answers wait for it
 *       to read ({@link StrictFraming}).</li>
 *   <li>A client's connection that carries no request for the idle timeout given ({@code --idle-timeout};
 *       {@link #IDLE_CLIENT_TIMEOUT_MS} ms unless told; kept alive and unused, or sending a head that does not end) is
 *       closed ({@link IdleClients}); one whose request is being handled, never.</li>
 *   <li>The {@code ip} key is the connection's address, or the client named in {@code X-Forwarded-For} when the
 *       connection comes from a trusted proxy; the gateway appends the connection's address to
 *       {@code X-Forwarded-For} on the way to the upstream.</li>
 * </ul>
 */
public final class Gateway implements AutoCloseable, Drains {
    static final int CONNECT_TIMEOUT_MS = 5_000;
    /** How long the upstream may stay silent before the gateway answers 504, by default. */
    public static final long DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;
    /**
     * How long a client's connection may carry no request, kept alive between requests or sending a head that does
     * not end, before it is closed ({@link IdleClients}): nginx's {@code client_header_timeout}, 60 s.
     */
    static final long IDLE_CLIENT_TIMEOUT_MS = 60_000;

    private final Vertx vertx;
    private final HttpServer server;
    private final Draining draining;
    /** The servers' own, one per event loop. */
    private final List<Limiting> loops;

    private Gateway(Vertx vertx, HttpServer server, Draining draining, List<Limiting> loops) {
        this.vertx = vertx;
        this.server = server;
        this.draining = draining;
        this.loops = loops;
    }

    /** Starts a gateway to {@code upstream} ({@code http://host:port} or {@code https://...}) on {@code host:port}. */
    public static Gateway start(LiveConfig live, URI upstream, String host, int port) throws Exception {
        return start(live, upstream, host, port, DEFAULT_UPSTREAM_TIMEOUT_MS);
    }

    /** As {@link #start(LiveConfig, URI, String, int)}, the upstream allowed {@code upstreamTimeoutMs} of silence. */
    public static Gateway start(LiveConfig live, URI upstream, String host, int port, long upstreamTimeoutMs)
            throws Exception {
        return start(live, upstream, host, port, upstreamTimeoutMs, null);
    }

    /**
     * As {@link #start(LiveConfig, URI, String, int, long)}, a client's connection that carries no request let go
     * after {@code idleClientMs} instead of {@value #IDLE_CLIENT_TIMEOUT_MS} ms.
     */
    public static Gateway start(LiveConfig live, URI upstream, String host, int port, long upstreamTimeoutMs,
                                long idleClientMs) throws Exception {
        return start(live, upstream, host, port, upstreamTimeoutMs, null, idleClientMs);
    }

    /**
     * As {@link #start(LiveConfig, URI, String, int, long)}, an {@code https} upstream's certificate checked with
     * {@code trusted}, or with the JDK's trusted certificates when null.
     */
    static Gateway start(LiveConfig live, URI upstream, String host, int port, long upstreamTimeoutMs,
                         SslContext trusted) throws Exception {
        return start(live, upstream, host, port, upstreamTimeoutMs, trusted, IDLE_CLIENT_TIMEOUT_MS);
    }

    /** As {@link #start(LiveConfig, URI, String, int, long, SslContext)}, an idle client let go after {@code idleClientMs}. */
    static Gateway start(LiveConfig live, URI upstream, String host, int port, long upstreamTimeoutMs,
                         SslContext trusted, long idleClientMs) throws Exception {
        // read before Vert.x starts: a bad address leaves no event loops running behind it (a review found them)
        UpstreamAddress address = UpstreamAddress.of(upstream);
        boolean tls = address.tls();
        String upstreamHost = address.host();
        int upstreamPort = address.portOrDefault();
        String hostHeader = address.hostHeader();
        Vertx vertx = Vertx.vertx(EventLoops.options());
        try {
            SslContext checked = !tls ? null : trusted != null ? trusted : SslContextBuilder.forClient().build();
            Draining draining = new Draining();
            UpstreamFailures reasons = new UpstreamFailures();
            List<Limiting> loops = new CopyOnWriteArrayList<>();
            HttpServer first = EventLoops.listen(vertx, EventLoops.count(), host, port, () -> {
                // connections of this loop's own: each stays on the loop of the requests it carries
                EventLoop loop = ((ContextInternal) Vertx.currentContext()).nettyEventLoop();
                Limiting limiting = new Limiting(live, new Forwarder(new UpstreamConnections((VertxInternal) vertx, loop,
                        upstreamHost, upstreamPort, checked, upstreamTimeoutMs, CONNECT_TIMEOUT_MS), hostHeader,
                        live.metrics()::gatewayFailed, reasons), Vertx.currentContext());
                loops.add(limiting);
                // Expect: 100-continue is answered here, once the request is admitted (Limiting.forward), never forwarded
                return ClientRules.server(vertx, idleClientMs, live.connections(), ClientConnections.Port.GATEWAY,
                        draining, limiting::handle);
            });
            return new Gateway(vertx, first, draining, loops);
        } catch (Exception e) {
            vertx.close();
            throw e;
        }
    }

    public int port() {
        return server.actualPort();
    }

    /** How it stops; for tests. */
    Draining draining() {
        return draining;
    }

    /**
     * Stops as the process is asked to ({@link Draining}): no new connection, each closed once its answer is over,
     * and the requests being handled go on.
     */
    @Override
    public void startDraining() {
        draining.start();
    }

    /**
     * Waits for the requests being handled until {@code deadlineNanos}. A request still held for its turn then is
     * answered {@code 503} ({@code {"error":"the gateway is stopping"}}), charged, as the servlet filter answers one
     * held while its application stops, and given a second more to go; one still with the upstream is cut when the
     * gateway closes, as nginx's {@code worker_shutdown_timeout} does.
     */
    @Override
    public void awaitDrained(long deadlineNanos) throws InterruptedException {
        if (draining.await(deadlineNanos)) {
            return;
        }
        loops.forEach(Limiting::stopHolding);
        draining.await(System.nanoTime() + TimeUnit.SECONDS.toNanos(1));
    }

    /** Decides each request on its way in, then forwards it, holds it for its turn, or answers it here; one a loop. */
    private static final class Limiting {
        private final LiveConfig live;
        private final Forwarder forwarder;
        private final Context loop;
        /** Each request held for its turn, and its timer; touched on {@link #loop} only. */
        private final HashMap<HttpServerRequest, Long> held = new HashMap<>();

        Limiting(LiveConfig live, Forwarder forwarder, Context loop) {
            this.live = live;
            this.forwarder = forwarder;
            this.loop = loop;
        }

        /** Answers {@code 503} every request still held for its turn, and forwards none of them. */
        void stopHolding() {
            loop.runOnContext(stopping -> {
                for (Map.Entry<HttpServerRequest, Long> one : List.copyOf(held.entrySet())) {
                    held.remove(one.getKey());
                    if (loop.owner().cancelTimer(one.getValue()) && !one.getKey().response().closed()) {
                        live.metrics().gatewayFailed("stopped_while_held");
                        local(one.getKey(), 503, Map.of("Connection", "close"), JsonNodeFactory.instance.objectNode()
                                .put("error", "the gateway is stopping").toString());
                    }
                }
            });
        }

        void handle(HttpServerRequest incoming) {
            incoming.pause(); // the body waits for the decision (and the delay) in the socket, not in memory
            Policies policies = live.policies();
            CompletionStage<Verdict> decided;
            try {
                ProxiedRequest.checkWellFormed(incoming);
                decided = policies.decide(new ProxiedRequest(incoming, policies.trustedProxies()));
            } catch (BadRequest e) {
                local(incoming, 400, Map.of(), JsonNodeFactory.instance.objectNode().put("error", e.getMessage()).toString());
                return;
            } catch (RuntimeException e) {
                Forwarder.dropRest(incoming);
                ApiServer.internalError(incoming, e);
                return;
            }
            Context eventLoop = Vertx.currentContext();
            decided.whenComplete((verdict, failure) -> onEventLoop(eventLoop, () -> {
                if (failure != null) {
                    Forwarder.dropRest(incoming);
                    ApiServer.internalError(incoming, failure);
                    return;
                }
                if (incoming.response().closed()) {
                    // the client left while the store decided (Redis): no handler set from here on would be told so
                    verdict.release();
                    return;
                }
                VerdictAnswer answer = new VerdictAnswer(verdict, policies.config().headers());
                long decidedAt = System.nanoTime(); // its resets count down from here to the answer's head
                if (!verdict.allowed()) {
                    local(incoming, answer.rejectionStatus(), answer.headers(), answer.rejectionText());
                    return;
                }
                long delayMs = DurationFormat.toMillisCeil(verdict.delayNanos());
                if (delayMs > 0) {
                    long timer = eventLoop.owner().setTimer(delayMs, fired -> {
                        held.remove(incoming);
                        forward(incoming, () -> answer.headersSince(decidedAt));
                    });
                    held.put(incoming, timer);
                    // a client that leaves while held is not forwarded at all
                    incoming.response().endHandler(ended -> verdict.release()).closeHandler(closed -> {
                        held.remove(incoming);
                        if (eventLoop.owner().cancelTimer(timer)) { // still held: charged, and never forwarded
                            live.metrics().gatewayFailed("left_while_held");
                        }
                        verdict.release();
                    });
                } else {
                    // in flight until its answer is over, however it ends
                    incoming.response().endHandler(ended -> verdict.release()).closeHandler(closed -> verdict.release());
                    forward(incoming, () -> answer.headersSince(decidedAt));
                }
            }));
        }

        /**
         * Forwards an admitted request. A client that sent {@code Expect: 100-continue} is told to send its body
         * only now, once admitted (and held for its turn): a request the limit refuses is answered before its body
         * is sent, as RFC 9110 §10.1.1 asks and nginx does (found by trying the gateway: the 100 went out at once,
         * and a refused upload was sent all the same). The upstream never sees the Expect.
         */
        private void forward(HttpServerRequest incoming, java.util.function.Supplier<Map<String, String>> headers) {
            if (expectsContinue(incoming) && !incoming.response().closed()) {
                incoming.response().writeContinue();
            }
            forwarder.forward(incoming, headers);
        }

        /** Runs {@code task} at once when on {@code eventLoop} already (the in-memory store decides there), else queued to it. */
        private static void onEventLoop(Context eventLoop, Runnable task) {
            if (Vertx.currentContext() == eventLoop) {
                task.run();
            } else {
                eventLoop.runOnContext(ignored -> task.run());
            }
        }

        /**
         * A local answer (429, 400): the body the client is sending is read and dropped, as nginx does, so the
         * connection is ready for the client's next request. But a client that waits for a 100 before it sends
         * its body may never send it, or send it later, where the next request would be read: its connection is
         * closed after the answer (RFC 9110 §10.1.1: the server says whether it reads on or closes).
         */
        private static void local(HttpServerRequest incoming, int status, Map<String, String> headers, String json) {
            boolean unsentBody = expectsContinue(incoming) && !incoming.isEnded();
            Forwarder.dropRest(incoming);
            HttpServerResponse response = incoming.response().setStatusCode(status);
            headers.forEach(response::putHeader);
            if (unsentBody) {
                response.putHeader("Connection", "close");
            }
            response.putHeader("Content-Type", "application/json").end(json).onComplete(sent -> {
                if (unsentBody) { // Vert.x closes after the answer only once the request is over, which may be never
                    incoming.connection().close();
                }
            });
        }
    }

    @Override
    public void close() throws Exception {
        vertx.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }

    /**
     * Whether {@code incoming} waits to be told to go on before it sends its body: an HTTP/1.1 request with
     * {@code Expect: 100-continue}. An HTTP/1.0 client knows no 100 (RFC 9110 §10.1.1: a server must not send it one),
     * and sends its body at once.
     */
    static boolean expectsContinue(HttpServerRequest incoming) {
        return incoming.version() == io.vertx.core.http.HttpVersion.HTTP_1_1
                && "100-continue".equalsIgnoreCase(incoming.getHeader("Expect"));
    }
}
