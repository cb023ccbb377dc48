package dev.sluice.server.envoy;

import dev.sluice.Clock;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.server.Checked;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.Verdict;
import dev.sluice.server.VerdictAnswer;
import dev.sluice.server.config.EnvoyUnit;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.Descriptor;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.Code;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;

import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Envoy's rate limit service, {@code envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit}, answered by the
 * policies in force (docs/envoy.md). Each descriptor of a call is decided as a request is, by the policies of the
 * {@code match.descriptor} its walk through the call's {@code domain} ends on ({@link Descriptor#walk}), less those
 * another limit of the call replaces (Envoy's {@code replaces}); the call is one request, so its
 * descriptors are charged in order and the first rejection ends it ({@code OVER_LIMIT}), as policies do for an HTTP
 * request: a descriptor after it is neither charged nor decided, and its status says {@code UNKNOWN}.
 *
 * <p>A descriptor that brings its own limit (Envoy's limit override) is decided by that limit instead
 * ({@link Policies#charges(List)}).
 *
 * <p>A malformed call is refused with {@code INVALID_ARGUMENT} and a message that names the field; it never becomes
 * a decision. So is a message that is not a {@code RateLimitRequest} at all (bytes protobuf cannot read, a string
 * that is not UTF-8): the service is bound with a marshaller of its own ({@link #definition}) that hands such a
 * message on as unreadable instead of throwing, since grpc-java answers a marshaller's exception with
 * {@code UNKNOWN} "Application error processing RPC" and logs its stack trace as SEVERE. A store that does not
 * answer is the configured failure policy's to decide, as everywhere.
 */
final class RateLimitService {
    private static final Logger LOG = Logger.getLogger(RateLimitService.class.getName());
    /** The largest value of a {@code uint32} field, as Java's unsigned view of an {@code int} reads it. */
    private static final long UINT32_MAX = 0xFFFF_FFFFL;

    /**
     * A call of more descriptors than this is decided on {@link #large}'s threads, not on the connection's event loop.
     * Calls are decided where they arrive, for speed; but one of 10,000 descriptors takes 100 ms and more, and held
     * the event loop of every connection it serves so long: a review measured another client's p99 go from 10 ms to
     * 50 (two such clients: 186), past Envoy's default timeout of 20 ms, which Envoy then lets through.
     */
    static final int LARGE_CALL = 64;

    private final LiveConfig live;
    /**
     * Where large calls are decided: a thread a core, a line of 256; a call past it, or come as the server closes, is
     * decided where it arrived, as before (slower for all, never an error or no answer: either is a pass for Envoy's
     * default failure_mode_deny: false). ThreadPoolExecutor's CallerRunsPolicy drops a task once shut down.
     * Made for the gRPC service only ({@link #definition}): the JSON calls of /json are decided on the API's event loop,
     * their bodies bounded at 64 KiB (some thousands of descriptors at most, against gRPC's 10,000 of any length).
     */
    private java.util.concurrent.ThreadPoolExecutor large;

    RateLimitService(LiveConfig live) {
        this.live = live;
    }

    private static java.util.concurrent.ThreadPoolExecutor largeCalls() {
        int cores = Runtime.getRuntime().availableProcessors();
        java.util.concurrent.atomic.AtomicInteger made = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.ThreadPoolExecutor large = new java.util.concurrent.ThreadPoolExecutor(cores, cores, 30,
                java.util.concurrent.TimeUnit.SECONDS,
                new java.util.concurrent.ArrayBlockingQueue<>(256), task -> {
                    Thread thread = new Thread(task, "sluice-envoy-large-" + made.incrementAndGet());
                    thread.setDaemon(true);
                    return thread;
                }, (task, pool) -> task.run()); // decided where it came, even once shut down: never left unanswered
        large.allowCoreThreadTimeOut(true);
        return large;
    }

    /** Ends the threads of large calls (those in line are still decided). */
    synchronized void close() {
        if (large != null) {
            large.shutdown();
        }
    }

    /** The service as the server binds it: Envoy's method, read by {@link Tolerant}. */
    synchronized ServerServiceDefinition definition() {
        java.util.concurrent.ThreadPoolExecutor large = this.large == null ? this.large = largeCalls() : this.large;
        MethodDescriptor<RateLimitRequest, RateLimitResponse> typed = RateLimitServiceGrpc.getShouldRateLimitMethod();
        MethodDescriptor<Received, RateLimitResponse> method = typed.toBuilder(new Tolerant(),
                typed.getResponseMarshaller()).build();
        return ServerServiceDefinition.builder(RateLimitServiceGrpc.SERVICE_NAME)
                .addMethod(method, ServerCalls.asyncUnaryCall((received, answer) -> {
                    if (received.unreadable() != null) {
                        answer.onError(Status.INVALID_ARGUMENT.withDescription(received.unreadable()).asRuntimeException());
                    } else if (received.request().getDescriptorsCount() > LARGE_CALL) {
                        large.execute(() -> {
                            try {
                                shouldRateLimit(received.request(), answer);
                            } catch (RuntimeException | Error e) { // answered, as gRPC answers what escapes its own thread
                                LOG.log(Level.SEVERE, "cannot decide a call of domain " + received.request().getDomain(), e);
                                answer.onError(Status.INTERNAL.withDescription("cannot decide; the server's log says why")
                                        .asRuntimeException());
                            }
                        });
                    } else {
                        shouldRateLimit(received.request(), answer);
                    }
                }))
                .build();
    }

    /** A call's message as read: the request, or why it is not one (then {@code request} is null). */
    record Received(RateLimitRequest request, String unreadable) {
    }

    /** Reads a message as protobuf does, but answers bytes it cannot read with why, instead of throwing. */
    private static final class Tolerant implements MethodDescriptor.Marshaller<Received> {
        private static final MethodDescriptor.Marshaller<RateLimitRequest> PROTOBUF =
                ProtoUtils.marshaller(RateLimitRequest.getDefaultInstance());

        @Override
        public InputStream stream(Received received) {
            return PROTOBUF.stream(received.request());
        }

        @Override
        public Received parse(InputStream stream) {
            try {
                return new Received(PROTOBUF.parse(stream), null);
            } catch (StatusRuntimeException e) {
                // the cause is protobuf's reason ("Protocol message had invalid UTF-8.", "... ended unexpectedly ...")
                String reason = e.getCause() != null ? e.getCause().getMessage() : e.getStatus().getDescription();
                return new Received(null, "the message is not a RateLimitRequest: " + reason);
            }
        }
    }

    void shouldRateLimit(RateLimitRequest request, StreamObserver<RateLimitResponse> answer) {
        Policies policies = live.policies();
        List<Policies.Charge> charges = new ArrayList<>();
        int[] ends = new int[request.getDescriptorsCount()];
        boolean[] unlimited = new boolean[request.getDescriptorsCount()];
        try {
            Call call = call(request, policies);
            if (call.nothing() >= 0 && policies.names(request.getDomain())) {
                answer.onNext(nothingAllowed(request, call));
                answer.onCompleted();
                live.metrics().rejected(call.nothingName());
                return;
            }
            List<List<Policies.Charge>> each = policies.charges(call.descriptors());
            for (int i = 0; i < each.size(); i++) {
                charges.addAll(each.get(i));
                ends[i] = charges.size();
                unlimited[i] = each.get(i).isEmpty() && policies.unlimited(call.descriptors().get(i));
            }
        } catch (BadRequest e) {
            answer.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        java.util.function.BooleanSupplier abandoned = answer instanceof ServerCallStreamObserver<RateLimitResponse> call
                ? call::isCancelled : () -> false;
        policies.decide(charges, abandoned).whenComplete((verdict, failure) -> {
            if (abandoned.getAsBoolean()) {
                return; // the caller has gone: an answer would only throw
            }
            try {
                if (failure != null) {
                    throw failure;
                }
                // one reading of the clock for the statuses and the headers beside them, which tell the same reset
                // (two readings a second's turn apart told it a second, or a window, apart: the diff review)
                long now = Clock.system().nanos();
                answer.onNext(response(verdict, ends, unlimited, now, new VerdictAnswer(verdict,
                        policies.config().envoyHeaders()).envoyHeaders((checked, rejected) ->
                        resetNanos(checked, rejected, now))));
                answer.onCompleted();
            } catch (Throwable unforeseen) {
                // a fault of Sluice's own, logged here, not told to the client (a review found the exception's text
                // sent, and nothing logged); the call ends rather than staying open until the client's deadline
                LOG.log(Level.SEVERE, "cannot decide a call of domain " + request.getDomain(), unforeseen);
                answer.onError(Status.INTERNAL.withDescription("cannot decide; the server's log says why")
                        .asRuntimeException());
            }
        });
    }

    /**
     * A call's descriptors, and the first of them held to a limit of 0 requests, with its unit and name ({@code -1}
     * and nulls when none is): one that brings such a limit ({@code <domain>/override}), or whose walk ends on one of
     * Envoy's files ({@code requests_per_unit: 0}).
     */
    private record Call(List<Descriptor> descriptors, int nothing, EnvoyUnit nothingUnit, String nothingName) {
    }

    /**
     * The answer to a call one of whose descriptors is held to a limit of 0 requests (one it brings, in a domain that
     * has limits, or one of Envoy's files, {@code requests_per_unit: 0}): over
     * the limit whole, as in Envoy's service, where no hit fits in 0; nothing is charged, since no request of
     * the call could be admitted. That descriptor's status says so, with the end of its unit's window; the others
     * are not decided ({@code UNKNOWN}).
     */
    private static RateLimitResponse nothingAllowed(RateLimitRequest request, Call call) {
        // windows aligned to the epoch, as Envoy's are: what is left of the one now
        Duration reset = Duration.ofNanos(untilWindowEnds(call.nothingUnit().nanos(), Clock.system().nanos()));
        RateLimitResponse.Builder response = RateLimitResponse.newBuilder().setOverallCode(Code.OVER_LIMIT);
        for (int i = 0; i < request.getDescriptorsCount(); i++) {
            if (i != call.nothing()) {
                response.addStatuses(DescriptorStatus.newBuilder().setCode(Code.UNKNOWN));
                continue;
            }
            response.addStatuses(status(Code.OVER_LIMIT, call.nothingName(), 0,
                    Unit.valueOf(call.nothingUnit().name()), 0, reset));
        }
        return response.build();
    }

    /**
     * The most descriptors one call may carry. Envoy sends one per rate limit action of a route, a handful; a call of
     * 120,000 (within gRPC's 4 MB) held the connection's thread 360 ms, and every call behind it waited (found by
     * attacking the port). Ten thousand take about 30 ms.
     */
    static final int MOST_DESCRIPTORS = 10_000;

    /** The call's descriptors, checked field by field. */
    private static Call call(RateLimitRequest request, Policies policies) {
        if (request.getDomain().isEmpty()) {
            throw new BadRequest("domain: must not be empty");
        }
        if (request.getDescriptorsCount() == 0) {
            throw new BadRequest("descriptors: at least one descriptor is needed");
        }
        if (request.getDescriptorsCount() > MOST_DESCRIPTORS) {
            throw new BadRequest("descriptors: at most " + MOST_DESCRIPTORS + " in a call, got "
                    + request.getDescriptorsCount());
        }
        // hits_addend 0 is "not set" in proto3: one hit, as in Envoy's own service
        long hits = request.getHitsAddend() == 0 ? 1 : Integer.toUnsignedLong(request.getHitsAddend());
        List<Descriptor> descriptors = new ArrayList<>(request.getDescriptorsCount());
        int nothing = -1;
        EnvoyUnit nothingUnit = null;
        String nothingName = null;
        for (int i = 0; i < request.getDescriptorsCount(); i++) {
            RateLimitDescriptor given = request.getDescriptors(i);
            String field = "descriptors[" + i + "]";
            // A descriptor without entries is well formed: Envoy sends one when every action of a rate limit was
            // skipped (request_headers with skip_if_absent and no such header). It fits no pattern, so it is OK and
            // charges nothing, as in Envoy's own service; refusing it refused the whole call, which Envoy's default
            // failure_mode_deny: false then let through unlimited (a review found that bypass).
            List<Descriptor.Entry> entries = new ArrayList<>(given.getEntriesCount());
            for (int j = 0; j < given.getEntriesCount(); j++) {
                RateLimitDescriptor.Entry entry = given.getEntries(j);
                if (entry.getKey().isEmpty()) {
                    throw new BadRequest(field + ".entries[" + j + "].key: must not be empty");
                }
                entries.add(new Descriptor.Entry(entry.getKey(), entry.getValue()));
            }
            long own = hits;
            if (given.hasHitsAddend()) { // set, 0 included: it overrides the call's
                own = given.getHitsAddend().getValue();
                if (own < 0) { // 2^63 or more: more than any limit holds, OVER_LIMIT as in Envoy's service (see Policies)
                    own = Long.MAX_VALUE;
                }
            }
            Limit limit = null;
            if (given.hasLimit()) {
                EnvoyUnit unit = unit(given.getLimit(), field);
                long amount = Integer.toUnsignedLong(given.getLimit().getRequestsPerUnit());
                if (amount > 0) {
                    limit = Limit.of(amount, unit.nanos());
                } else if (nothing < 0 && own > 0) { // a look (hits 0) at a limit of 0 is OK, as 0 hits > 0 is not
                    // in Envoy's service (a review found it answered OVER_LIMIT)
                    nothing = i;
                    nothingUnit = unit;
                    nothingName = Policies.overrideName(request.getDomain());
                }
            }
            Descriptor descriptor = new Descriptor(request.getDomain(), entries, own, limit);
            if (limit == null && !given.hasLimit() && nothing < 0 && own > 0) {
                ServerConfig.Envoy.Blocked blocked = policies.blocked(descriptor);
                if (blocked != null) { // requests_per_unit: 0 in Envoy's files
                    nothing = i;
                    nothingUnit = blocked.unit();
                    nothingName = blocked.name();
                }
            }
            descriptors.add(descriptor);
        }
        return new Call(descriptors, nothing, nothingUnit, nothingName);
    }

    /** The unit of a descriptor's limit override (Envoy's service takes so many requests a unit). */
    private static EnvoyUnit unit(RateLimitDescriptor.RateLimitOverride override, String field) {
        Unit unit = Unit.forNumber(override.getUnitValue()); // the answer's enum: the same numbers, WEEK included
        EnvoyUnit length = unit == null ? null : EnvoyUnit.named(unit.name());
        if (length == null) {
            throw new BadRequest(field + ".limit.unit: expected one of " + EnvoyUnit.names().toUpperCase(Locale.ROOT)
                    + ", got " + (unit == null ? Integer.toString(override.getUnitValue()) : unit.name()));
        }
        return length;
    }

    /**
     * The answer: overall {@code OVER_LIMIT} when a policy rejected; for each descriptor the decision of the policy
     * that rejected it, else of the one closest to rejecting it; and Sluice's rate limit headers, for Envoy to add
     * to the client's answer.
     */
    private static RateLimitResponse response(Verdict verdict, int[] ends, boolean[] unlimited, long now,
                                              Map<String, String> headers) {
        RateLimitResponse.Builder response = RateLimitResponse.newBuilder()
                .setOverallCode(verdict.allowed() ? Code.OK : Code.OVER_LIMIT);
        List<Checked> decided = verdict.checked();
        for (int i = 0; i < ends.length; i++) {
            int from = i == 0 ? 0 : ends[i - 1];
            List<Checked> own = decided.subList(Math.min(from, decided.size()), Math.min(ends[i], decided.size()));
            if (own.isEmpty()) {
                // no policy for it (OK, as Envoy's own service answers), or not reached after a rejection; one that
                // ends on an unlimited node has all a uint32 holds remaining, as Envoy's service tells it (a review)
                DescriptorStatus.Builder status = DescriptorStatus.newBuilder().setCode(from == ends[i] ? Code.OK
                        : Code.UNKNOWN);
                if (from == ends[i] && unlimited[i]) {
                    status.setLimitRemaining((int) UINT32_MAX);
                }
                response.addStatuses(status);
                continue;
            }
            Verdict its = new Verdict(own);
            response.addStatuses(status(its.allowed() ? Code.OK : Code.OVER_LIMIT, its.reported(), now));
        }
        headers.forEach((name, value) -> response.addResponseHeadersToAdd(
                HeaderValue.newBuilder().setKey(name).setValue(value)));
        return response.build();
    }

    /**
     * A descriptor's status as Envoy's own service gives it (a review compared them field by field):
     * <ul>
     *   <li>over the limit, nothing remaining, and the wait to the end of the window even when nothing of it was
     *   taken (a cost that never fits: the decision's reset is 0 then), where the decision tells what a smaller
     *   cost could still take.</li>
     *   <li>a fixed window's reset is the wait to the end of the window, for a key nothing has touched yet too (a
     *   look with {@code hits_addend: 0}), as Envoy's windows always end; a review found {@code 0s} there.</li>
     * </ul>
     */
    private static DescriptorStatus status(Code code, Checked checked, long now) {
        Decision decision = checked.decision();
        if (decision.storeFailed()) {
            // the store did not answer: no limit and no count, as the HTTP faces send no quota then; Envoy builds its
            // X-RateLimit headers from the statuses that have a current_limit only. Failing closed, the wait until the
            // store is tried again
            DescriptorStatus.Builder failed = DescriptorStatus.newBuilder().setCode(code);
            if (code == Code.OVER_LIMIT) {
                failed.setDurationUntilReset(com.google.protobuf.Duration.newBuilder()
                        .setSeconds(DurationFormat.toSecondsCeil(Math.max(0, decision.retryAfterNanos()))));
            }
            return failed.build();
        }
        Limit limit = decision.limit();
        return status(code, checked.policy().name(), limit.amount(), unit(limit.periodNanos()),
                code == Code.OVER_LIMIT ? 0 : decision.remaining(),
                Duration.ofNanos(resetNanos(checked, code == Code.OVER_LIMIT, now)));
    }

    /**
     * The reset a descriptor's status tells (above), and the rate limit headers handed to Envoy beside it: the
     * limit's, or, where the decision's is 0, the wait that admits a rejected hit, else the end of a window, as
     * Envoy's windows always end, at {@code now} ({@link Clock#system()}).
     */
    static long resetNanos(Checked checked, boolean overLimit, long now) {
        Decision decision = checked.decision();
        long reset = decision.limitResetAfterNanos();
        if (overLimit && reset == 0) {
            return decision.retryAfterNanos() > 0 ? decision.retryAfterNanos()
                    : untilWindowEnds(decision.limit().periodNanos(), now);
        }
        if (reset == 0 && checked.policy().rule() != null
                && checked.policy().rule().algorithm() == dev.sluice.Algorithm.FIXED_WINDOW) {
            return untilWindowEnds(decision.limit().periodNanos(), now);
        }
        return reset;
    }

    /**
     * What is left of the window of {@code periodNanos} aligned to the epoch, as Envoy's are, on the clock the
     * in-memory store's windows follow ({@link Clock#system()}: the wall clock read once, then the monotonic one), so
     * that the wall clock stepped after the start (NTP at a VM's boot) does not move it off the windows enforced.
     */
    private static long untilWindowEnds(long periodNanos, long now) {
        if (periodNanos % 1_000_000_000L != 0) {
            return 0; // no unit of Envoy's: a policy of sluice.yaml's in milliseconds
        }
        return periodNanos - Math.floorMod(now, periodNanos);
    }

    /**
     * A descriptor's status: its limit ({@code uint32} fields, so capped), what is left of it, and when it resets, in
     * whole seconds rounded up, as Envoy's service sends it: Envoy reads only the seconds (its {@code X-RateLimit-Reset}),
     * so 1.9 s read as 1, and a window of a second always as 0 (a review found it).
     */
    private static DescriptorStatus status(Code code, String name, long amount, Unit unit, long remaining,
                                           Duration reset) {
        long seconds = reset.getSeconds() + (reset.getNano() > 0 ? 1 : 0);
        return DescriptorStatus.newBuilder().setCode(code)
                .setCurrentLimit(RateLimitResponse.RateLimit.newBuilder().setName(name)
                        .setRequestsPerUnit((int) Math.min(amount, UINT32_MAX)).setUnit(unit))
                .setLimitRemaining((int) Math.min(Math.max(remaining, 0), UINT32_MAX))
                .setDurationUntilReset(com.google.protobuf.Duration.newBuilder().setSeconds(seconds))
                .build();
    }

    /** Envoy's unit for a period of exactly one of them; any other period has none ({@code UNKNOWN}). */
    static Unit unit(long periodNanos) {
        EnvoyUnit unit = EnvoyUnit.of(periodNanos);
        return unit == null ? Unit.UNKNOWN : Unit.valueOf(unit.name());
    }
}
