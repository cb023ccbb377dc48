package dev.sluice.servlet;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.DurationFormat;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.Verdict;
import dev.sluice.server.VerdictAnswer;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.server.request.BadRequest;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.FilterConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Sluice inside an application: a Jakarta Servlet filter that decides every request by the policies of a
 * {@code sluice.yaml} (docs/server.md; docs/servlet.md for the filter), as the gateway does in front of one.
 *
 * <ul>
 *   <li>Admitted: the rate limit headers are set on the response, and the request goes on down the chain.</li>
 *   <li>Rejected: {@code 429} (or the policy's {@code reject_status}) with {@code Retry-After}, the headers and
 *       {@code {"error":"rate limited","policy":...,"retry_after_ms":...}}; the application never sees it.</li>
 *   <li>{@code mode: delay}: the request waits its turn, then goes on. Where asynchronous processing is supported
 *       (this filter and those before it marked {@code async-supported}) it waits without a thread, asynchronous,
 *       and is dispatched again when its turn comes ({@link DispatcherType#ASYNC}: a filter after this one that
 *       must see every request, authentication say, is mapped for asynchronous dispatches too, or placed before
 *       this one); where it is not, its thread sleeps.</li>
 *   <li>A concurrency policy holds the request's place until the chain returns, or, when the application went
 *       asynchronous, until its asynchronous processing is over.</li>
 *   <li>A malformed cost header or query is a {@code 400} that names it; nothing is charged.</li>
 * </ul>
 *
 * <p>A request is decided on its first pass through the filter, as a request, as a forward (a filter before this
 * one that rewrites URLs by forwarding, say: a past bug left such requests undecided) or as an asynchronous dispatch
 * (a filter before this one parked it and resumed it), at the path it has then; forwards, includes, error pages and
 * asynchronous dispatches of a request already decided are not counted again (a request attribute of this filter's
 * own marks it).
 *
 * <p>Configured with the init parameter {@code config}, the path of the file (reloaded within a second of an edit,
 * as {@code sluice serve} does; a bad file stops the filter from starting with the message that names file, line
 * and field), or built around a {@link LiveConfig} the application owns.
 */
public final class SluiceFilter implements Filter {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final System.Logger LOG = System.getLogger(SluiceFilter.class.getName());
    /**
     * The request attribute that marks a request this filter has decided: each filter its own, so that two (two
     * configurations in one chain, or an application forwarded to from another that runs its own) each decide a
     * request once. One name for all had the second let every request through undecided (from a review); so did
     * names numbered by a counter of this class, which each web application loads anew, so that the first filter of
     * each had the same (from a review): a random name is no other filter's, whoever loaded it.
     */
    private final String decided = SluiceFilter.class.getName() + ".decided." + java.util.UUID.randomUUID();
    /**
     * The dispatches on which a request not yet decided by this filter is decided: as the client sent it, forwarded
     * (a filter before this one that rewrites URLs by forwarding), or dispatched again after a filter before this one
     * parked it (as Jetty's QoSFilter and DoSFilter resume the requests they suspend: a review found such requests let
     * through undecided, under load, when they are parked). Includes and error pages are parts of an answer, not
     * requests.
     */
    private static final Set<DispatcherType> FIRST_PASSES =
            java.util.EnumSet.of(DispatcherType.REQUEST, DispatcherType.FORWARD, DispatcherType.ASYNC);
    /** Requests held for their turn: answered {@code 503} if the application stops before their turn comes. */
    private final java.util.Set<AsyncContext> held = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private LiveConfig live;
    /** Whether this filter made {@link #live} from its init parameter, and so closes it. */
    private boolean owned;
    private ScheduledExecutorService turns;
    /** Between destroy and the next init: a container may init the same filter again, as Jetty does on a restart. */
    private boolean destroyed;

    /** For a container that reads the init parameter {@code config}. */
    public SluiceFilter() {
    }

    /** Decides by {@code live}, which the caller keeps and closes. */
    public SluiceFilter(LiveConfig live) {
        this.live = live;
    }

    @Override
    public void init(FilterConfig config) throws ServletException {
        synchronized (this) {
            destroyed = false;
        }
        if (live != null) {
            return;
        }
        String file = config.getInitParameter("config");
        if (file == null || file.isBlank()) {
            throw new ServletException("filter " + config.getFilterName()
                    + ": init parameter config: missing; it names the sluice.yaml whose policies the filter enforces");
        }
        String packaged = file.startsWith(CLASSPATH) ? resource(config, file.substring(CLASSPATH.length())) : null;
        ServerMetrics metrics = metrics(config);
        try {
            if (packaged != null) {
                live = LiveConfig.of(file, ConfigLoader.parse(file, packaged), metrics);
            } else {
                live = LiveConfig.load(Path.of(file), metrics);
                live.watch(Duration.ofSeconds(1));
            }
        } catch (ConfigException e) {
            metrics.close(); // its listeners, or its meters in the application's registry, would outlive the failure
            throw new ServletException(e.getMessage());
        } catch (RuntimeException e) {
            metrics.close();
            throw e;
        }
        owned = true;
    }

    /**
     * The metrics the init parameter {@code metrics} asks for: {@code own} (the default), a registry of their own,
     * the JVM's meters with them, served by {@code live().metrics().scrape()}; {@code global}, Micrometer's
     * {@code Metrics.globalRegistry}, which Spring Boot adds its own registries to, so that Sluice's meters are served
     * with the application's ({@code /actuator/prometheus}), each tagged {@code sluice_filter} with the filter's name.
     */
    private static ServerMetrics metrics(FilterConfig config) throws ServletException {
        String metrics = config.getInitParameter("metrics");
        if (metrics == null || metrics.equals("own")) {
            return new ServerMetrics();
        }
        if (metrics.equals("global")) {
            // tagged sluice_filter=<its name>: two filters (one before the application's authentication, one after), or the
            // contexts a test framework keeps in one JVM, each have meters of their own (a review found the second
            // filter refused, and the application's start with it)
            return new ServerMetrics(io.micrometer.core.instrument.Metrics.globalRegistry, config.getFilterName());
        }
        throw new ServletException("filter " + config.getFilterName() + ": init parameter metrics: \"" + metrics
                + "\": expected own (a registry of Sluice's own, the default) or global (Micrometer's global registry)");
    }

    /**
     * How the init parameter {@code config} names a file inside the application ({@code classpath:sluice.yaml}): a
     * Spring Boot application ships as one jar, and a path cannot name a file in it (a review found no way to). Read
     * once; a file of the file system is read again when it changes.
     */
    static final String CLASSPATH = "classpath:";

    /** The text of {@code name}, a resource of the application's class loader. */
    private static String resource(FilterConfig config, String name) throws ServletException {
        ClassLoader loader = config.getServletContext().getClassLoader();
        String path = name.startsWith("/") ? name.substring(1) : name;
        try (java.io.InputStream in = (loader != null ? loader : SluiceFilter.class.getClassLoader())
                .getResourceAsStream(path)) {
            if (in == null) {
                throw new ServletException("filter " + config.getFilterName() + ": init parameter config: " + CLASSPATH
                        + name + ": no such resource in the application");
            }
            return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ServletException("filter " + config.getFilterName() + ": init parameter config: " + CLASSPATH
                    + name + ": cannot read: " + e.getMessage(), e);
        }
    }

    /** The configuration in force, its metrics ({@code live().metrics().scrape()}: Prometheus text) included. */
    public LiveConfig live() {
        return live;
    }

    @Override
    public void doFilter(ServletRequest servletRequest, ServletResponse servletResponse, FilterChain chain)
            throws IOException, ServletException {
        if (!(servletRequest instanceof HttpServletRequest request)
                || !(servletResponse instanceof HttpServletResponse response)
                || request.getAttribute(decided) != null
                || !FIRST_PASSES.contains(request.getDispatcherType())) {
            chain.doFilter(servletRequest, servletResponse);
            return;
        }
        request.setAttribute(decided, Boolean.TRUE);
        Policies policies = live.policies();
        Verdict verdict;
        java.util.concurrent.CompletableFuture<Verdict> deciding = null;
        try {
            deciding = policies.decide(new ServletClientRequest(request, policies.trustedProxies()))
                    .toCompletableFuture();
            verdict = deciding.get();
        } catch (BadRequest e) {
            answer(response, 400, Map.of(), JSON.createObjectNode().put("error", e.getMessage()).toString());
            return;
        } catch (InterruptedException e) {
            // the request goes no further: the places its verdict holds are given back once it is made, not held to
            // their lease's end (a review found them held, a minute by default)
            deciding.thenAccept(Verdict::release);
            Thread.currentThread().interrupt();
            throw new ServletException("interrupted while the request was being decided", e);
        } catch (ExecutionException | RuntimeException e) { // a fault of Sluice's own: the store's are decisions
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            LOG.log(System.Logger.Level.ERROR, "failed to decide " + request.getMethod() + " " + request.getRequestURI(), cause);
            answer(response, 500, Map.of(), JSON.createObjectNode().put("error", "internal error; the log says more").toString());
            return;
        }
        VerdictAnswer answer = new VerdictAnswer(verdict, policies.config().headers());
        if (!verdict.allowed()) {
            answer(response, answer.rejectionStatus(), answer.headers(), answer.rejectionText());
            return;
        }
        boolean releasedLater = false;
        try {
            answer.headersAfterHold().forEach(response::setHeader);
            long delayMs = DurationFormat.toMillisCeil(verdict.delayNanos());
            if (delayMs > 0 && request.isAsyncSupported()) {
                hold(request, response, verdict, delayMs);
                releasedLater = true;
                return;
            }
            if (delayMs > 0) {
                Thread.sleep(delayMs);
                if (isDestroyed()) { // the application stopped while it slept: its servlets are gone (found on Tomcat)
                    answer(response, 503, Map.of(), JSON.createObjectNode().put("error", "the application is stopping")
                            .toString());
                    return;
                }
            }
            chain.doFilter(request, response);
            if (request.isAsyncStarted()) {
                request.getAsyncContext().addListener(new Releasing(verdict));
                releasedLater = true;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ServletException("interrupted while the request waited its turn", e);
        } finally {
            if (!releasedLater) {
                verdict.release();
            }
        }
    }

    /**
     * Holds an admitted request for {@code delayMs} without its thread: the request goes asynchronous, the thread
     * goes back to the container, and when its turn comes the request is dispatched again to where it was going
     * ({@link DispatcherType#ASYNC}, which this filter lets through undecided), as Jetty's own QoSFilter resumes
     * the requests it suspends. So the filters after this one see it only if they are mapped for asynchronous
     * dispatches too (docs/servlet.md; continuing the chain on another thread instead would keep an application
     * that goes asynchronous itself from doing so). Its places are given back when its answer is over, as for a
     * request the application made asynchronous. If the application stops first, it is answered {@code 503}.
     */
    private void hold(HttpServletRequest request, HttpServletResponse response, Verdict verdict, long delayMs) {
        AsyncContext context = request.startAsync(request, response);
        long containers = context.getTimeout();
        context.setTimeout(0); // the turn ends the wait, not the container's timeout for asynchronous requests
        context.addListener(new Releasing(verdict, held));
        held.add(context);
        try {
            ScheduledExecutorService timer = turns();
            if (timer == null) {
                throw new RejectedExecutionException("the filter is destroyed");
            }
            timer.schedule(() -> {
                if (held.remove(context)) { // else answered as the application stopped
                    resume(context, request, containers);
                }
            }, delayMs, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) { // decided as the filter was destroyed: the application is stopping
            if (held.remove(context)) {
                stopping(context);
            }
        }
    }

    /**
     * Sends a held request on, to where it was going. Tomcat's {@code dispatch()} takes the context path off the URI
     * as written, so {@code //app/items} failed ("does not start with a /"), and a dispatch as the application stops
     * fails too (its mapping gone): the exception was lost on the timer, and the request answered 500 by the
     * container's timeout 30 s later (found by trying the filter in Tomcat). So a failed dispatch is tried again to
     * the path the container mapped, and then the request is answered 503 at once, and logged.
     */
    private static void resume(AsyncContext context, HttpServletRequest request, long containers) {
        // the container's own again, for an application that goes asynchronous itself: a container may keep the 0 for
        // its startAsync, and such a request never timed out (found by trying it on Jetty 12)
        context.setTimeout(containers);
        try {
            context.dispatch();
            return;
        } catch (RuntimeException first) {
            String mapped = request.getServletPath() + (request.getPathInfo() == null ? "" : request.getPathInfo())
                    + (request.getQueryString() == null ? "" : "?" + request.getQueryString());
            try {
                context.dispatch(mapped);
                return;
            } catch (RuntimeException second) {
                first.addSuppressed(second);
                LOG.log(System.Logger.Level.WARNING, "a held request (" + request.getMethod() + " "
                        + request.getRequestURI() + ") could not be sent on when its turn came; answered 503", first);
            }
        }
        try {
            answer((HttpServletResponse) context.getResponse(), 503, Map.of(), JSON.createObjectNode()
                    .put("error", "the request could not go on after its turn; the log says why").toString());
        } catch (IOException | RuntimeException e) {
            // the client is gone, or the container has already answered
        }
        try {
            context.complete();
        } catch (IllegalStateException e) {
            // completed by the container already
        }
    }

    private synchronized boolean isDestroyed() {
        return destroyed;
    }

    /** The timer of held requests, made with the first after each init; null once destroyed. */
    private synchronized ScheduledExecutorService turns() {
        if (destroyed) {
            return null;
        }
        if (turns == null) {
            turns = Executors.newSingleThreadScheduledExecutor(task -> {
                Thread thread = new Thread(task, "sluice-filter-turns");
                thread.setDaemon(true);
                return thread;
            });
        }
        return turns;
    }

    /** An answer of the filter's own: the client's body is not read (the container drains or closes). */
    private static void answer(HttpServletResponse response, int status, Map<String, String> headers, String json)
            throws IOException {
        response.setStatus(status);
        headers.forEach(response::setHeader);
        response.setContentType("application/json");
        response.setCharacterEncoding(StandardCharsets.UTF_8.name());
        response.getWriter().write(json);
    }

    /**
     * Gives a concurrency policy's place back when the application's asynchronous processing is over; and a request
     * still {@code held} for its turn that the container fails (a server stopping closes its requests before its
     * filters are destroyed) is answered 503, as {@link #destroy} answers it (found by trying it: the container's 500,
     * and a destroy that threw on the completed request and never closed the configuration).
     */
    private record Releasing(Verdict verdict, Set<AsyncContext> held) implements AsyncListener {
        Releasing(Verdict verdict) {
            this(verdict, null);
        }

        @Override
        public void onComplete(AsyncEvent event) {
            if (held != null) {
                held.remove(event.getAsyncContext());
            }
            verdict.release();
        }

        @Override
        public void onTimeout(AsyncEvent event) {
            verdict.release();
        }

        @Override
        public void onError(AsyncEvent event) {
            if (held != null && held.remove(event.getAsyncContext())) {
                stopping(event.getAsyncContext());
            }
            verdict.release();
        }

        @Override
        public void onStartAsync(AsyncEvent event) {
            event.getAsyncContext().addListener(this); // started again: listen to the new cycle too
        }
    }

    /** Answers a request held for its turn 503, as the application is stopping, and completes it. */
    private static void stopping(AsyncContext context) {
        try {
            answer((HttpServletResponse) context.getResponse(), 503, Map.of(),
                    JSON.createObjectNode().put("error", "the application is stopping").toString());
        } catch (IOException | RuntimeException e) {
            // the client is gone, or the container has already answered
        }
        try {
            context.complete();
        } catch (IllegalStateException e) {
            // completed by the container already
        }
    }

    @Override
    public void destroy() {
        synchronized (this) {
            destroyed = true;
            if (turns != null) {
                turns.shutdownNow();
                turns = null; // an init of this same filter makes another (Jetty inits a filter it was given again)
            }
        }
        // the requests still waiting for their turn are answered, not stranded with their clients waiting
        for (AsyncContext context : held) {
            if (held.remove(context)) {
                stopping(context);
            }
        }
        if (owned) {
            try {
                live.close();
            } catch (Exception e) {
                // the application is stopping anyway
            }
            live.metrics().close(); // else its listeners on the JVM's beans keep this application's class loader
            live = null; // an init of this same filter reads the file again
            owned = false;
        }
    }
}
