package dev.sluice.server.metrics;

import dev.sluice.redis.RedisStore;
import dev.sluice.server.Checked;
import dev.sluice.server.ClientConnections;
import dev.sluice.server.Verdict;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;

/**
 * The server's counters under the Prometheus names of docs/server.md, and the JVM's own:
 * {@code sluice_decisions_total{policy,outcome}}, {@code sluice_requests_total{outcome}},
 * {@code sluice_store_errors_total{store}},
 * {@code sluice_store_seconds} (a histogram of the time from asking the store to its answer),
 * {@code sluice_fail_open_total}, {@code sluice_fail_closed_total}, {@code sluice_config_reloads_total{result}};
 * and, beyond the spec, what the Redis store's failure policy did ({@link StoreEvent}: timeouts, calls the open
 * circuit breaker spared, its openings, scripts loaded again, rejections answered from memory), each
 * {@code sluice_store_<event>_total{store}}. The store's counts are read from the store when scraped
 * ({@link RedisStore#counts()}), those of the stores a reload replaced kept; the in-memory store never fails.
 *
 * <p>In a registry of their own ({@link #ServerMetrics()}: the server's, {@link #scrape} its {@code /metrics}), or in an
 * application's ({@link #ServerMetrics(MeterRegistry)}: Sluice inside a Spring application, say), which they leave when
 * closed.
 */
public final class ServerMetrics implements AutoCloseable {
    /**
     * Where Sluice's meters are registered: a Prometheus registry of their own, or, in an application's registry, a
     * composite over it that holds just these meters, so that {@link #close} knows which are this one's.
     */
    private final MeterRegistry registry;
    /** Whether {@link #registry} is Sluice's own; else {@link #application} is the registry the meters visit. */
    private final boolean own;
    private final MeterRegistry application;
    /**
     * The names ({@code filter} tags) of the {@code ServerMetrics} whose meters an application's registry holds now, by
     * registry, those a composite (the global registry) reaches included: a second one's meters of the same name and
     * tags would be the first's (its gauges reading the first's state), and the first's closing would take them away.
     * Guarded by itself.
     */
    private static final Map<MeterRegistry, java.util.Set<String>> TAKEN = new java.util.WeakHashMap<>();
    /** The tag that tells apart the meters of each {@code ServerMetrics} in one application's registry. */
    public static final String NAME_TAG = "sluice_filter";
    /** In an application's registry: this one's {@link #NAME_TAG}, and the registries it is taken in. */
    private final String name;
    private final java.util.List<MeterRegistry> takenIn;
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();
    /**
     * The JVM's collections, heard through listeners on the JVM's own beans: they outlive this unless closed. Null in
     * an application's registry, which has the JVM's meters of its own.
     */
    private final JvmGcMetrics collections;
    private final Map<String, Map<Checked.Outcome, Counter>> decisions = new ConcurrentHashMap<>();
    private final Map<RequestOutcome, Counter> requests = new EnumMap<>(RequestOutcome.class);
    /**
     * The time of a store's decisions, by pool: {@code shared}, or a policy's own in-memory store. Apart, so that a
     * Redis store's times are not hidden by the microseconds of policies with an in-memory store of their own (a
     * review found the alert on a slow store blind so); a concurrency policy asks no store, and is not timed.
     */
    private final Map<String, Timer> storeTimes = new ConcurrentHashMap<>();
    /** The store decided on now, and the failure counts of the stores it replaced (a counter never goes back). */
    private volatile Store store;
    private volatile String storeKind;
    /** The counts of the stores a reload replaced and closed, by kind, in the order of {@link StoreEvent}. */
    private final Map<String, long[]> retired = new ConcurrentHashMap<>();
    /**
     * The Redis stores a reload replaced and has not closed yet, with their kind: still deciding what was asked of
     * them, so still counted as they go (a review found their last counts, those of a failing Redis being left,
     * lost). Guarded by this.
     */
    private final Map<RedisStore, String> retiring = new java.util.IdentityHashMap<>();
    private final Traffic traffic = new Traffic();
    /** The in-memory stores' room: the shared store's and the policies' own. */
    private final RoomMeters room;

    /** Whether the last reload was applied (or none was tried): {@code sluice_config_last_reload_successful}. */
    private volatile boolean configInForce = true;

    /** Sluice's meters and the JVM's, in a Prometheus registry of their own ({@link #scrape}: the server's /metrics). */
    public ServerMetrics() {
        this(new PrometheusMeterRegistry(PrometheusConfig.DEFAULT), null, null);
    }

    /** {@link #ServerMetrics(MeterRegistry, String)} named {@code sluice}. */
    public ServerMetrics(MeterRegistry application) {
        this(application, "sluice");
    }

    /**
     * Sluice's meters in an application's registry, under the same names: Spring Boot's {@code MeterRegistry}, or
     * Micrometer's {@code Metrics.globalRegistry}, so they are served where the application serves its own (Spring's
     * {@code /actuator/prometheus}). The JVM's meters are left to the application, which has its own; {@link #close}
     * removes Sluice's from the registry, those of this one only.
     *
     * <p>Each meter is tagged {@code sluice_filter=name}, so that several (two filters, one before the application's
     * authentication and one after; the contexts a test framework keeps alive in one JVM) keep meters of their own: a
     * name another one holds in that registry, or in one under it as this one is made, is taken with {@code -2},
     * {@code -3}, ... after it. One {@code ServerMetrics} to one {@code LiveConfig}.
     * Before, a second was refused, and a second filter stopped the application's start.
     */
    public ServerMetrics(MeterRegistry application, String name) {
        this(java.util.Objects.requireNonNull(application, "the application's registry"),
                free(application, java.util.Objects.requireNonNull(name, "the name")));
    }

    private ServerMetrics(MeterRegistry application, Taken taken) {
        this(over(application, taken.name()), application, taken);
    }

    /** A name, and the registries it was taken in. */
    private record Taken(String name, java.util.List<MeterRegistry> registries) {
    }

    /** {@code name}, or the first of {@code name-2}, {@code name-3}, ... that no registry {@code application} reaches holds. */
    private static Taken free(MeterRegistry application, String name) {
        java.util.List<MeterRegistry> reached = new java.util.ArrayList<>();
        reach(application, reached);
        synchronized (TAKEN) {
            String free = name;
            for (int n = 2; holds(reached, free); n++) {
                free = name + "-" + n;
            }
            for (MeterRegistry one : reached) {
                TAKEN.computeIfAbsent(one, r -> new java.util.HashSet<>()).add(free);
            }
            return new Taken(free, java.util.List.copyOf(reached));
        }
    }

    private static boolean holds(java.util.List<MeterRegistry> registries, String name) {
        return registries.stream().anyMatch(one -> TAKEN.getOrDefault(one, java.util.Set.of()).contains(name));
    }

    /** {@code registry} and every registry under it, if it is a composite. */
    private static void reach(MeterRegistry registry, java.util.List<MeterRegistry> reached) {
        reached.add(registry);
        if (registry instanceof io.micrometer.core.instrument.composite.CompositeMeterRegistry composite) {
            composite.getRegistries().forEach(under -> reach(under, reached));
        }
    }

    /** A composite over {@code application} whose meters are tagged with {@code name}. */
    private static MeterRegistry over(MeterRegistry application, String name) {
        io.micrometer.core.instrument.composite.CompositeMeterRegistry composite =
                new io.micrometer.core.instrument.composite.CompositeMeterRegistry();
        composite.config().commonTags(NAME_TAG, name);
        return composite.add(application);
    }

    /** The name this one's meters are tagged with in an application's registry ({@link #NAME_TAG}); null in its own. */
    public String name() {
        return name;
    }

    private ServerMetrics(MeterRegistry registry, MeterRegistry application, Taken taken) {
        this.registry = registry;
        this.name = taken == null ? null : taken.name();
        this.takenIn = taken == null ? java.util.List.of() : taken.registries();
        this.own = application == null;
        this.application = application;
        this.collections = own ? new JvmGcMetrics() : null;
        this.room = new RoomMeters(registry, this::remove);
        // buckets from 1 µs: Micrometer's default first bucket, 1 ms, held nearly every decision of a healthy store (an
        // in-memory one takes about a microsecond, a Redis on the same network tens of them), so the dashboard's
        // median read 0.5 ms whatever the store did (a review found it)
        storeTime(RoomMeters.SHARED); // there from the start, at 0
        for (RequestOutcome outcome : RequestOutcome.values()) {
            requests.put(outcome, Counter.builder("sluice.requests").tag("outcome", outcome.label)
                    .description("Requests (an HTTP request, a call of Envoy's, a /v1/check) by what all the policies"
                            + " they matched decided together").register(registry));
        }
        for (String what : GATEWAY_FAILURES) { // each at 0 from the start, as Prometheus's rate() wants
            Counter.builder("sluice.gateway.failures").tag("what", what).description("Admitted requests the gateway"
                    + " could not carry through, by what it did instead").register(registry);
        }
        for (String result : new String[] {"success", "failure"}) {
            Counter.builder("sluice.config.reloads").tag("result", result)
                    .description("Configuration reloads, applied (success) or refused (failure)").register(registry);
        }
        FunctionCounter.builder("sluice.fail.open", this, metrics -> metrics.total(null, StoreEvent.FAILED_OPEN))
                .description(StoreEvent.FAILED_OPEN.description).register(registry);
        FunctionCounter.builder("sluice.fail.closed", this, metrics -> metrics.total(null, StoreEvent.FAILED_CLOSED))
                .description(StoreEvent.FAILED_CLOSED.description).register(registry);
        // as Prometheus's own prometheus_config_last_reload_successful: a count of refusals cannot say the refused file is
        // still there (its alert resolved by itself, a review found)
        Gauge.builder("sluice.config.last.reload.successful", this, metrics -> metrics.configInForce ? 1 : 0)
                .description("1 while the configuration on disk is the one in force; 0 from a refused edit (or a store"
                        + " that cannot be reached) until an edit is applied").register(registry);
        // whether the store answers: 0 while a Redis store's circuit breaker is open (a review found the breaker's
        // state nowhere in the metrics: a Redis back showed only as failures that stopped); a PING at most a second
        Gauge.builder("sluice.store.up", this, metrics -> metrics.store instanceof RedisStore redis && !redis.healthy()
                        ? 0 : 1)
                .description("1 while the store answers; 0 while the Redis store's circuit breaker is open (the store"
                        + " failed calls in a row, and decisions follow on_store_failure)").register(registry);
        if (own) {
            new ClassLoaderMetrics().bindTo(registry);
            new JvmMemoryMetrics().bindTo(registry);
            collections.bindTo(registry);
            new JvmThreadMetrics().bindTo(registry);
            new ProcessorMetrics().bindTo(registry);
            new UptimeMetrics().bindTo(registry);
        }
    }

    /**
     * Stops listening to the JVM's collections. A server process ends with its metrics; an application that
     * undeploys a filter that made its own must close them, or the listeners on the JVM's beans keep the
     * application's class loader, and run at every collection, for as long as the JVM lives (micrometer#1349).
     */
    @Override
    public void close() {
        // once: a second close would take the meters of the same ids, and the name, of one made since (a review)
        if (closed.getAndSet(true)) {
            return;
        }
        if (own) {
            collections.close();
            return;
        }
        // an application's registry outlives a filter undeployed or replaced: this one's meters leave it, or they would
        // go on being served, frozen, and keep this (their functions read it) for as long as the application lives.
        // The composite lets go of it first: a meter registered after (a late count) stays out of it
        ((io.micrometer.core.instrument.composite.CompositeMeterRegistry) registry).remove(application);
        for (Meter meter : registry.getMeters()) {
            removeFrom(application, meter.getId());
        }
        synchronized (TAKEN) {
            for (MeterRegistry one : takenIn) {
                java.util.Set<String> names = TAKEN.get(one);
                if (names != null) {
                    names.remove(name);
                }
            }
        }
    }

    /** Takes {@code meter} out of Sluice's registry, and out of the application's registry under it. */
    private void remove(Meter meter) {
        registry.remove(meter);
        if (!own) {
            removeFrom(application, meter.getId());
        }
    }

    /**
     * Removes the meter {@code id} (as registered, before the registry's filters: Spring's common tags) from
     * {@code registry}, and from every registry under it if it is a composite (Micrometer's global registry): a
     * composite's meters live in the registries under it, where a composite over it registers them directly.
     */
    private static void removeFrom(MeterRegistry registry, Meter.Id id) {
        if (registry instanceof io.micrometer.core.instrument.composite.CompositeMeterRegistry composite) {
            composite.getRegistries().forEach(under -> removeFrom(under, id));
        }
        registry.removeByPreFilterId(id);
    }

    /** What a store's failure policy counts ({@link RedisStore.Counts}), and the meter of each by store kind. */
    private enum StoreEvent {
        FAILURES("sluice.store.errors", "Decisions whose store call failed or timed out (each decision of a batched call)", RedisStore.Counts::failures),
        FAILED_OPEN(null, "Decisions admitted because the store did not answer", RedisStore.Counts::failedOpen),
        FAILED_CLOSED(null, "Decisions rejected because the store did not answer", RedisStore.Counts::failedClosed),
        TIMEOUTS("sluice.store.timeouts", "Decisions whose store call got no answer within the store timeout (each decision of a batched call)",
                RedisStore.Counts::timeouts),
        SHORT_CIRCUITED("sluice.store.short.circuited", "Decisions the open circuit breaker made without asking the"
                + " store", RedisStore.Counts::shortCircuited),
        BREAKER_OPENINGS("sluice.store.breaker.openings", "Times the circuit breaker opened on a failing store",
                RedisStore.Counts::breakerOpenings),
        SCRIPT_RELOADS("sluice.store.script.reloads", "Scripts sent to a Redis that did not have them (NOSCRIPT): on"
                + " each script's first call to a new or restarted Redis, and after a SCRIPT FLUSH",
                RedisStore.Counts::scriptReloads),
        REMEMBERED_REJECTIONS("sluice.store.remembered.rejections", "Rejections answered from memory, before their"
                + " retry-after, without asking the store", RedisStore.Counts::localRejections);

        /** The meter, tagged with the store's kind; null for the spec's two untagged ones. */
        final String meter;
        final String description;
        final ToLongFunction<RedisStore.Counts> count;

        StoreEvent(String meter, String description, ToLongFunction<RedisStore.Counts> count) {
            this.meter = meter;
            this.description = description;
            this.count = count;
        }
    }

    /** Counts the failures of {@code current}, the store the policies now decide on, of kind {@code kind}. */
    public void watch(Store current, String kind) {
        room.shared(current);
        synchronized (this) {
            if (store instanceof RedisStore redis && redis != current) {
                retiring.put(redis, storeKind); // counted as it finishes; its counts kept once it is closed (retired)
            }
            store = current;
            storeKind = kind;
        }
        // registered outside the lock, which a scrape's reading of these counters takes: never one lock inside the other
        for (StoreEvent event : StoreEvent.values()) {
            if (event.meter != null) {
                FunctionCounter.builder(event.meter, this, metrics -> metrics.total(kind, event))
                        .tag("store", kind).description(event.description).register(registry);
            }
        }
    }

    /**
     * The stores of the policies that have one of their own ({@code max_keys} in a policy), by policy name, now: each
     * counted as a pool of {@code sluice_store_keys} and the rest; a pool not in {@code own} is gone.
     */
    public void watchOwn(Map<String, InMemoryStore> own) {
        room.own(own);
    }

    /** {@code old}, replaced by a reload, is closed: its counts are final, and kept as they are. */
    public synchronized void retired(Store old) {
        if (old instanceof RedisStore redis && retiring.containsKey(redis)) {
            RedisStore.Counts counts = redis.counts();
            long[] sums = retired.computeIfAbsent(retiring.remove(redis), k -> new long[StoreEvent.values().length]);
            for (StoreEvent event : StoreEvent.values()) {
                sums[event.ordinal()] += event.count.applyAsLong(counts);
            }
        }
    }

    /**
     * The count of {@code event} over the stores of {@code kind} (null: all), the current one and those replaced.
     * Under the lock {@link #watch} holds: a scrape between its adding the old store's counts to the retired ones and
     * its taking the new store counted the old store twice, and the next scrape's drop read as a counter reset (a
     * review found it).
     */
    private synchronized double total(String kind, StoreEvent event) {
        long sum = 0;
        for (Map.Entry<String, long[]> entry : retired.entrySet()) {
            if (kind == null || kind.equals(entry.getKey())) {
                sum += entry.getValue()[event.ordinal()];
            }
        }
        if (store instanceof RedisStore redis && (kind == null || kind.equals(storeKind))) {
            sum += event.count.applyAsLong(redis.counts());
        }
        for (Map.Entry<RedisStore, String> going : retiring.entrySet()) {
            if (kind == null || kind.equals(going.getValue())) {
                sum += event.count.applyAsLong(going.getKey().counts());
            }
        }
        return sum;
    }

    /** Counts one policy's decision on one request, which took the store {@code storeNanos}. */
    public void decided(Checked checked, long storeNanos) {
        String policy = checked.policy().name();
        decisions.computeIfAbsent(policy, this::countersOf).get(checked.outcome()).increment();
        if (checked.policy().inFlight() == null) {
            storeTime(checked.policy().maxKeys() > 0 ? policy : RoomMeters.SHARED).record(storeNanos, TimeUnit.NANOSECONDS);
        }
        traffic.record(policy, checked.key(), checked.outcome());
    }

    /** The timer of a pool's decisions, made as first asked (a present one is found without a lock). */
    private Timer storeTime(String pool) {
        // buckets from 1 µs: Micrometer's default first bucket, 1 ms, held nearly every decision of a healthy store (an
        // in-memory one takes about a microsecond, a Redis on the same network tens of them), so the dashboard's
        // median read 0.5 ms whatever the store did (a review found it)
        return storeTimes.computeIfAbsent(pool, named -> Timer.builder("sluice.store").tag("pool", named)
                .description("Time from asking the store for a decision to its answer").publishPercentileHistogram()
                .minimumExpectedValue(Duration.ofNanos(1_000)).register(registry));
    }

    /**
     * Counts a request (an HTTP request, a call of Envoy's, a {@code /v1/check}) by what its policies decided
     * together: {@code sluice_decisions_total} counts each policy's decision, so a request that two policies
     * admitted counted twice there, and one admitted by the first and rejected by the second counted once each way
     * (a review found no count of the requests themselves).
     */
    public void requested(Verdict verdict) {
        requests.get(RequestOutcome.of(verdict)).increment();
    }

    /**
     * Counts a request rejected, and its policy's rejection, that no store was asked for: a limit of 0 requests that
     * a call to Envoy's service brings.
     */
    public void rejected(String policy) {
        decisions.computeIfAbsent(policy, this::countersOf).get(Checked.Outcome.REJECTED).increment();
        requests.get(RequestOutcome.REJECTED).increment();
    }

    /** What a request's policies decided together, a label of {@code sluice_requests_total}. */
    private enum RequestOutcome {
        /** Admitted at once by every policy that matched it (shadow policies that would reject included). */
        ALLOWED("allowed"),
        /** Admitted, to go on after a delay (delay mode, shaping). */
        DELAYED("delayed"),
        /** Refused by a policy. */
        REJECTED("rejected"),
        /** A cost of 0 everywhere: what is left was asked, nothing taken. */
        PEEKED("peeked"),
        /** No policy matched it, or each that did lacked a part of its key: not limited. */
        UNLIMITED("unlimited");

        final String label;

        RequestOutcome(String label) {
            this.label = label;
        }

        static RequestOutcome of(Verdict verdict) {
            if (verdict.checked().isEmpty()) {
                return UNLIMITED;
            }
            if (!verdict.allowed()) {
                return REJECTED;
            }
            if (verdict.delayNanos() > 0) {
                return DELAYED;
            }
            return verdict.checked().stream().allMatch(one -> one.outcome() == Checked.Outcome.PEEKED) ? PEEKED : ALLOWED;
        }
    }

    private Map<Checked.Outcome, Counter> countersOf(String policy) {
        Map<Checked.Outcome, Counter> counters = new EnumMap<>(Checked.Outcome.class);
        for (Checked.Outcome outcome : Checked.Outcome.values()) {
            counters.put(outcome, Counter.builder("sluice.decisions").tag("policy", policy).tag("outcome", outcome.label())
                    .description("Decisions by policy and outcome").register(registry));
        }
        return counters;
    }

    /** What the gateway answered in place of the upstream, or did, for an admitted request: a label of {@link #gatewayFailed}. */
    private static final java.util.List<String> GATEWAY_FAILURES = java.util.List.of("502", "504", "408", "400", "cut_off",
            "left_while_held", "stopped_while_held");

    /**
     * Counts an admitted request the gateway could not carry through (a review found none counted): {@code 502}
     * (the upstream unreachable or failed), {@code 504} (silent past its timeout), {@code 408} (the client's body
     * stopped coming), {@code 400} (a header the upstream's connection cannot carry), {@code cut_off} (the answer had
     * begun, and the client's connection was closed), {@code left_while_held} (the client left while held by delay
     * mode, or waiting for a connection to the upstream: charged, never forwarded), {@code stopped_while_held} (still
     * held when the gateway's time to stop ran out: answered 503, charged, never forwarded).
     */
    public void gatewayFailed(String what) {
        registry.counter("sluice.gateway.failures", "what", what).increment();
    }

    /**
     * Counts a request a concurrency policy rejected because it held its most places over all keys
     * ({@code ConcurrencyLimiter.DEFAULT_MAX_PLACES}), not for its key's limit: {@code sluice_in_flight_turned_away_total}.
     */
    public void inFlightTurnedAway(String policy) {
        inFlight(policy).increment();
    }

    /** Exports a concurrency policy's {@code sluice_in_flight_turned_away_total} at 0, before anything is turned away. */
    public void watchInFlight(String policy) {
        inFlight(policy);
    }

    private Counter inFlight(String policy) {
        return Counter.builder("sluice.in.flight.turned.away").tag("policy", policy)
                .description("Requests a concurrency policy rejected because it held its most places over all keys")
                .register(registry);
    }

    /**
     * Exports what {@code connections} holds: {@code sluice_client_connections} (open now, over every port),
     * {@code sluice_connections_refused_total} (closed as accepted, the most being open) and
     * {@code sluice_unsent_answer_bytes} (HTTP answers waiting for their clients to read them).
     */
    public void watch(ClientConnections connections) {
        Gauge.builder("sluice.client.connections", connections,
                        ClientConnections::open)
                .description("Client connections open, over the gateway, API and gRPC ports").register(registry);
        Gauge.builder("sluice.unsent.answer.bytes", connections,
                        ClientConnections::unsentAnswers)
                .description("Bytes of HTTP answers waiting for clients to read them, over every connection")
                .register(registry);
        FunctionCounter.builder("sluice.connections.refused", connections, ClientConnections::refused)
                .description("Client connections closed as they were accepted, the most (--max-connections) being open")
                .register(registry);
    }

    /** Counts a reload of the configuration file, applied or refused; refused, the file is not in force until applied. */
    public void reloaded(boolean applied) {
        registry.counter("sluice.config.reloads", "result", applied ? "success" : "failure").increment();
        configInForce = applied;
    }

    /** The configuration on disk is the one in force again, without a reload (a refused edit undone, say). */
    public void inForce() {
        configInForce = true;
    }

    /**
     * Exports a policy's {@code sluice_decisions_total} at 0 for every outcome, before its first decision: a series
     * that first appears at its first count is missed by {@code rate()} and {@code increase()}, which start from it
     * (a review found a shadow policy's first rejections nowhere in its alert).
     */
    public void watchDecisions(String policy) {
        decisions.computeIfAbsent(policy, this::countersOf);
    }

    public double reloads(boolean applied) {
        return registry.counter("sluice.config.reloads", "result", applied ? "success" : "failure").count();
    }

    /** The recent traffic the dashboard shows. */
    public Traffic traffic() {
        return traffic;
    }

    /**
     * Every meter of the registry in the Prometheus text format: Sluice's and the JVM's; in an application's
     * Prometheus registry, the application's too.
     *
     * @throws IllegalStateException in an application's registry that is not a Prometheus one: the application
     *                               serves its meters its own way
     */
    public String scrape() {
        MeterRegistry holder = own ? registry : application;
        if (holder instanceof PrometheusMeterRegistry prometheus) {
            return prometheus.scrape();
        }
        throw new IllegalStateException("Sluice's metrics are in the application's registry, a "
                + holder.getClass().getSimpleName() + ", which has no Prometheus text: the application serves them");
    }
}
