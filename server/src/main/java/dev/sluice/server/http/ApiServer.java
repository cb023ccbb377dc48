package dev.sluice.server.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.Limit;
import dev.sluice.server.Checked;
import dev.sluice.server.ClientConnections;
import dev.sluice.server.Drains;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.Policies;
import dev.sluice.server.Verdict;
import dev.sluice.server.VerdictAnswer;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.envoy.JsonCalls;
import dev.sluice.server.request.BadRequest;
import dev.sluice.server.request.StrictUtf8;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;

import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

/**
 * The HTTP API of {@code sluice serve} (docs/server.md): {@code POST /v1/check}, {@code POST /v1/check-request},
 * {@code GET /v1/policies}, {@code GET /healthz}, {@code GET /metrics}, and the dashboard ({@code GET /}, fed by
 * {@code GET /v1/stats}); and {@code POST /v1/release}, which gives back a concurrency policy's place before
 * its lease runs out ({@link HeldPlaces}). Decisions go through the limiter's async face: the in-memory store answers at once,
 * and the Redis store answers when Redis does (or its timeout passes) without holding the event loop. Each
 * request is decided under the configuration in force when it arrived.
 */
public final class ApiServer implements AutoCloseable, Drains {
    private static final long MAX_BODY = 64 * 1024;
    private static final Set<String> CHECK_FIELDS = Set.of("policy", "key", "cost");
    private static final Set<String> RELEASE_FIELDS = Set.of("permit");
    private static final long SECOND_MS = 1000;

    private final Vertx vertx;
    private final LiveConfig live;
    private final Dashboard dashboard;
    private final HeldPlaces held = new HeldPlaces();
    private final Draining draining = new Draining();
    /** Whether the process is about to stop ({@link #announceStopping}): {@code /healthz} says so. */
    private volatile boolean stopping;
    private final JsonCalls envoy;
    /** How long a connection may carry no request, and a request's body take to come whole. */
    private final long idleTimeoutMs;
    private int port;

    private ApiServer(Vertx vertx, LiveConfig live, long idleTimeoutMs) {
        this.vertx = vertx;
        this.live = live;
        this.idleTimeoutMs = idleTimeoutMs;
        this.dashboard = new Dashboard(live);
        this.envoy = new JsonCalls(live);
        vertx.setPeriodic(SECOND_MS, tick -> held.dropExpired(System.nanoTime()));
    }

    /**
     * How long a connection may carry no request before it is closed, and how long a request's body may take to come
     * whole (nginx's {@code keepalive_timeout}, {@code client_header_timeout} and {@code client_body_timeout}, 60 to
     * 75 s): a client that stopped halfway through a request's head or body held its connection, and its buffer, for
     * good (found by trying the API). A request being decided is never cut, however long its store takes (the store's
     * timeout bounds each of its policies): the gateway's watch ({@link IdleClients}), not Vert.x's idle timeout,
     * which counts the bytes moved and cut a request whose policies waited on a silent Redis longer than it (a review
     * found it).
     */
    static final long IDLE_TIMEOUT_MS = 60_000;

    /** Starts listening on {@code host:port} (port 0: any free port). */
    public static ApiServer start(LiveConfig live, String host, int port) throws Exception {
        return start(live, host, port, IDLE_TIMEOUT_MS);
    }

    /** Starts listening, closing a connection that carries no request for {@code idleTimeoutMs}. */
    public static ApiServer start(LiveConfig live, String host, int port, long idleTimeoutMs) throws Exception {
        Vertx vertx = Vertx.vertx(EventLoops.options());
        try {
            ApiServer api = new ApiServer(vertx, live, idleTimeoutMs);
            // the gateway's rules: a client pipelining without bound, say, holds a loop here too
            api.port = EventLoops.listen(vertx, EventLoops.count(), host, port,
                    () -> ClientRules.server(vertx, idleTimeoutMs, live.connections(),
                            ClientConnections.Port.SERVICE, api.draining, api::answer)).actualPort();
            return api;
        } catch (Exception e) {
            vertx.close();
            throw e;
        }
    }

    /** The port it listens on. */
    public int port() {
        return port;
    }

    /** Answers every request, whatever happens: a bug becomes a 500 with a line in the log, never a hang. */
    private void answer(HttpServerRequest request) {
        try {
            handle(request);
        } catch (RuntimeException | Error e) {
            internalError(request, e);
        }
    }

    static void internalError(HttpServerRequest request, Throwable e) {
        System.getLogger(ApiServer.class.getName()).log(System.Logger.Level.ERROR,
                "failed to answer " + request.method() + " " + request.path(), e);
        if (!request.response().ended()) {
            error(request.response(), 500, "internal error; the server's log says more");
        }
    }

    private void handle(HttpServerRequest request) {
        String path = request.path();
        Policies policies = live.policies();
        switch (path) {
            case "/v1/check" -> post(request, "{\"policy\": \"api\", \"key\": \"user-42\"}",
                    // the policies in force once the body is read, which may be long after its head: a store replaced
                    // meanwhile may be closed by then (a review found it)
                    (body, sent) -> check(request, live.policies(), body));
            case "/v1/check-request" -> post(request, "{\"method\": \"GET\", \"path\": \"/api/items\", \"ip\": \"10.0.0.7\"}",
                    (body, sent) -> checkRequest(request, live.policies(), body));
            case "/v1/release" -> post(request, "{\"permit\": \"<the permit /v1/check answered>\"}",
                    (body, sent) -> release(request, body));
            // Envoy's rate limit call over HTTP/1, as Envoy's own service takes it for clients without gRPC
            case "/json" -> post(request, "{\"domain\": \"edge\", \"descriptors\": [{\"entries\": [{\"key\":"
                    + " \"remote_address\", \"value\": \"10.0.0.7\"}]}]}", (body, sent) -> envoyCall(request, sent));
            case "/v1/policies" -> get(request, () -> json(request.response(), 200, policiesJson(policies)));
            case "/v1/stats" -> get(request, () -> json(request.response(), 200, dashboard.stats(policies)));
            // 200 while the service can decide (docs/server.md), and with the store down it still can, by the failure
            // policy: a 503 would make every load balancer and readiness probe take out every server on that Redis at
            // once, handing the calls to whatever their callers do without a limiter. The body tells of the store.
            // /healthcheck: the path of Envoy's own rate limit service, for the probes of those who switch (a review)
            // a server about to stop (--stop-delay) says so with a 503: what takes it out of its load balancers
            case "/healthz", "/healthcheck" -> get(request, () -> {
                boolean healthy = dashboard.storeHealthy();
                json(request.response(), stopping ? 503 : 200, JsonNodeFactory.instance.objectNode()
                        .put("status", stopping ? "stopping" : healthy ? "ok" : "store unavailable").put("store", policies.config().storeShown())
                        .put("on_store_failure", policies.config().onStoreFailure().name().toLowerCase(java.util.Locale.ROOT)));
            });
            case "/metrics" -> get(request, () -> request.response().setStatusCode(200)
                    .putHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    .end(live.metrics().scrape()));
            case "/" -> get(request, () -> request.response().setStatusCode(200)
                    .putHeader("Content-Type", "text/html; charset=utf-8").end(Dashboard.page()));
            default -> error(request.response(), 404, "no such endpoint: " + request.method() + " " + path);
        }
    }

    /** A GET, or a HEAD, answered with the same head and no body (as nginx answers one; Vert.x leaves it out). */
    private static void get(HttpServerRequest request, Runnable answer) {
        if (request.method() != HttpMethod.GET && request.method() != HttpMethod.HEAD) {
            // Allow, as a 405 must carry (RFC 9110 15.5.6; a review found none)
            error(request.response().putHeader("Allow", "GET, HEAD"), 405, "use GET for " + request.path());
            return;
        }
        answer.run();
    }

    /** What a POSTed object is handed to: the object read, and the body sent (UTF-8, checked). */
    @FunctionalInterface
    private interface BodyHandler {
        void handle(JsonNode body, Buffer sent);
    }

    /** Reads a POSTed JSON object and hands it on; anything else is answered with a 4xx that says why. */
    private void post(HttpServerRequest request, String example, BodyHandler handler) {
        if (request.method() != HttpMethod.POST) {
            error(request.response().putHeader("Allow", "POST"), 405, "use POST for " + request.path());
            return;
        }
        // a browser sends Origin with every POST, of another origin or its own; curl, Envoy and servers send none. A
        // page anywhere could POST text/plain here without a preflight and spend anyone's limit (a review found it),
        // and comparing Origin with Host let by a page whose DNS name is rebound to this address (both its name)
        if (request.getHeader("Origin") != null) {
            error(request.response(), 403, "a request from a browser's page (Origin: " + request.getHeader("Origin")
                    + ") is refused: a page of another site, or one its DNS rebinds to this address, must not spend"
                    + " anyone's limit");
            return;
        }
        String length = request.getHeader("Content-Length");
        if (length != null && length.matches("\\d{1,18}") && Long.parseLong(length) > MAX_BODY) {
            request.response().putHeader("Connection", "close"); // refused before a byte of it is read
            error(request.response(), 413, "the body is larger than " + MAX_BODY + " bytes");
            return;
        }
        if (Gateway.expectsContinue(request)) {
            // the client waits for this before it sends the body (curl a second, others for good), as nginx sends it
            // once it reads the body (a review found the API silent); never to HTTP/1.0, which knows no 100 (a review)
            request.response().writeContinue();
        }
        Buffer body = Buffer.buffer();
        // the body whole within the idle timeout of its head, or a 408 and the connection closed (nginx's
        // client_body_timeout): the idle watch leaves a request alone from its head on
        long deadline = vertx.setTimer(idleTimeoutMs, late -> {
            if (!request.response().ended() && !request.response().closed()) {
                error(request.response(), 408, "the body did not come whole within "
                        + dev.sluice.DurationFormat.format(TimeUnit.MILLISECONDS.toNanos(idleTimeoutMs)) + ": "
                        + body.length() + " bytes came");
                request.connection().close();
            }
        });
        request.response().endHandler(answered -> vertx.cancelTimer(deadline)); // answered first: a 413, say
        request.handler(chunk -> {
            if (body.length() + chunk.length() > MAX_BODY) {
                if (!request.response().ended()) {
                    error(request.response(), 413, "the body is larger than " + MAX_BODY + " bytes");
                    request.connection().close();
                }
                return;
            }
            body.appendBuffer(chunk);
        });
        request.exceptionHandler(e -> {
            // the body broke off: answered already when the decoder refused it (a 400 that names why), and then the
            // connection's close comes here too, where a second answer threw, a 3 KB stack trace in the log a
            // request (a review filled the log at 24 MB a second)
            if (!request.response().headWritten() && !request.response().closed()) {
                error(request.response(), 400, "cannot read the body: " + e.getMessage());
            }
        });
        request.endHandler(ended -> {
            vertx.cancelTimer(deadline); // whole: the time its decision takes is the store's, not the client's
            if (request.response().ended()) {
                return;
            }
            try {
                JsonNode json = parse(request.response(), body, example);
                if (json != null) {
                    handler.handle(json, body);
                }
            } catch (BadRequest e) {
                error(request.response(), 400, e.getMessage());
            } catch (RuntimeException | Error e) {
                internalError(request, e);
            }
        });
    }

    /** Reads request bodies strictly: a field given twice, or anything after the object, is a 400, not a guess. */
    private static final com.fasterxml.jackson.databind.ObjectMapper BODIES = dev.sluice.server.config.StrictJson.READER;

    private static JsonNode parse(HttpServerResponse response, Buffer body, String example) {
        if (body.length() > MAX_BODY) {
            error(response, 413, "the body is larger than " + MAX_BODY + " bytes");
            return null;
        }
        byte[] bytes = body.getBytes();
        int notUtf8 = StrictUtf8.firstBadByte(bytes);
        if (notUtf8 >= 0) { // else "x\xC0\xAFy" would be the key "x/y", read by Jackson as it reads an overlong '/'
            error(response, 400, "the body is not valid UTF-8 (byte " + (notUtf8 + 1) + ")");
            return null;
        }
        JsonNode json;
        try {
            json = BODIES.readTree(bytes);
        } catch (com.fasterxml.jackson.databind.exc.MismatchedInputException e) { // trailing tokens
            error(response, 400, "the body holds more than one JSON value: one object is expected, such as " + example);
            return null;
        } catch (JsonProcessingException e) {
            // without the parser's advice to its programmer ("enable JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS")
            // without the parser's advice to its programmer ("enable JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS",
            // "from StreamReadConstraints.getMaxNestingDepth()") or where it read from (a review found both sent)
            error(response, 400, "the body is not JSON: " + e.getOriginalMessage()
                    .replaceAll(":? *\\(?enable `?JsonReadFeature\\.[A-Z_]+`? to allow\\)?", "")
                    .replaceAll(", from `?StreamReadConstraints\\.[A-Za-z]+\\(\\)`?", "")
                    // "(start marker at [Source: ...; line: 1, column: 1])": where, less the source
                    .replaceAll(" *\\[Source: [^]]*; line: (\\d+), column: (\\d+)]", " line $1, column $2")
                    .replaceAll(" *\\[Source: [^]]*]", ""));
            return null;
        } catch (java.io.IOException e) {
            error(response, 400, "the body is not JSON");
            return null;
        }
        if (json == null || !json.isObject()) {
            error(response, 400, "the body must be a JSON object such as " + example);
            return null;
        }
        String lone = loneSurrogate(json, "");
        if (lone != null) {
            error(response, 400, lone);
            return null;
        }
        return json;
    }

    /**
     * Where a string of {@code json} holds a lone surrogate ({@code "\\ud800"}, an escape the bytes' UTF-8 check cannot
     * see and Jackson takes), as a message naming the field; null when none does. UTF-8 has no bytes for one: the
     * Redis store would write {@code ?} in its place, and {@code "user\\ud800"} would count as {@code "user?"} (a
     * review found it).
     */
    private static String loneSurrogate(JsonNode json, String field) {
        if (json.isTextual()) {
            return holdsHalfAPair(json.asText()) ? field + ": holds a \\u escape of half a surrogate pair, which is no"
                    + " character" : null;
        }
        if (json.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = json.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> member = it.next();
                String name = field.isEmpty() ? member.getKey() : field + "." + member.getKey();
                if (holdsHalfAPair(member.getKey())) {
                    return name.replaceAll("\\p{Cs}", "\uFFFD") + ": the name holds a \\u escape of half a surrogate"
                            + " pair, which is no character";
                }
                String found = loneSurrogate(member.getValue(), name);
                if (found != null) {
                    return found;
                }
            }
        }
        if (json.isArray()) {
            for (int i = 0; i < json.size(); i++) {
                String found = loneSurrogate(json.get(i), field + "[" + i + "]");
                if (found != null) {
                    return found;
                }
            }
        }
        return null;
    }

    private static boolean holdsHalfAPair(String text) {
        // a pair is one code point past U+FFFF; half of one is a code point of its own, of type SURROGATE
        return text.codePoints().anyMatch(c -> Character.getType(c) == Character.SURROGATE);
    }

    private void check(HttpServerRequest http, Policies policies, JsonNode request) {
        onlyFields(request, CHECK_FIELDS, "policy, key and optionally cost");
        JsonNode policyNode = request.get("policy");
        if (policyNode == null || !policyNode.isTextual()) {
            throw new BadRequest("policy: expected the name of a policy as a string" + got(policyNode));
        }
        JsonNode keyNode = request.get("key");
        if (keyNode == null || !keyNode.isTextual() || keyNode.asText().isEmpty()) {
            throw new BadRequest("key: expected a non-empty string" + got(keyNode));
        }
        long cost = -1; // none given: the policy's own, found below
        JsonNode costNode = request.get("cost");
        if (costNode != null) {
            if (!costNode.isIntegralNumber() || !costNode.canConvertToLong() || costNode.asLong() < 0) {
                // a number too large for a double (1e400) is Infinity to the parser, not the text "Infinity"
                throw new BadRequest("cost: expected a whole number >= 0, got " + (costNode.isNumber()
                        && !Double.isFinite(costNode.asDouble()) ? "a number past a double's range" : costNode));
            }
            cost = costNode.asLong();
        }
        String name = policyNode.asText();
        PolicyConfig policy = policies.policy(name);
        if (policy == null) {
            error(http.response(), 404, "policy: no policy named \"" + name + "\"");
            return;
        }
        if (cost < 0) {
            // a request of the policy costs what it says (cost: 5), as through the gateway, where 1 charged a fifth
            // (the spec review); one whose cost a header carries, what a request without the header pays (1)
            cost = policy.cost();
        }
        reply(http, policies, policies.decide(policy, keyNode.asText(), cost),
                (answer, response) -> {
                    ObjectNode body = answer.checkBody();
                    String permit = answer.verdict().allowed() ? held.hold(answer.verdict().checked().get(0)) : null;
                    json(response, answer.status(), permit == null ? body : body.put("permit", permit));
                });
    }

    private void checkRequest(HttpServerRequest http, Policies policies, JsonNode request) {
        DescribedRequest described = DescribedRequest.of(request);
        reply(http, policies, policies.decide(described), (answer, response) -> {
            ObjectNode body = answer.checkRequestBody();
            List<Checked> checked = answer.verdict().checked();
            // a refused request holds no place: the places its earlier policies took are given back already
            for (int i = 0; answer.verdict().allowed() && i < checked.size(); i++) {
                String permit = held.hold(checked.get(i));
                if (permit != null) {
                    ((ObjectNode) body.get("checked").get(i)).put("permit", permit);
                }
            }
            json(response, answer.status(), body);
        });
    }

    /** Refuses a body with a field other than {@code known}, naming it and what is {@code expected}. */
    private static void onlyFields(JsonNode request, Set<String> known, String expected) {
        for (Iterator<String> names = request.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!known.contains(name)) {
                throw new BadRequest("unknown field \"" + name + "\": expected " + expected);
            }
        }
    }

    /** What a field held, for a message that says what it expected: nothing when it was missing. */
    private static String got(JsonNode node) {
        return node == null ? ", got nothing" : ", got " + node;
    }

    private void release(HttpServerRequest http, JsonNode request) {
        onlyFields(request, RELEASE_FIELDS, "permit");
        JsonNode permit = request.get("permit");
        if (permit == null || !permit.isTextual()) {
            throw new BadRequest("permit: expected the permit string that /v1/check or /v1/check-request answered"
                    + got(permit));
        }
        if (!HeldPlaces.isId(permit.asText())) {
            throw new BadRequest("permit: \"" + permit.asText() + "\" is not a permit (those are "
                    + HeldPlaces.ID_DIGITS + " hex digits, as /v1/check and /v1/check-request answer them)");
        }
        if (!held.release(permit.asText())) {
            error(http.response(), 404, "permit: no place is held under \"" + permit.asText()
                    + "\" (given back already, or its lease ran out)");
            return;
        }
        json(http.response(), 200, JsonNodeFactory.instance.objectNode().put("released", true));
    }

    /**
     * {@code POST /json}: a 400 naming what is wrong, else Envoy's answer and status (200, or 429 over the limit). The
     * call is read from the text sent, not from the object Jackson read, which writes {@code 7.70} as {@code 7.7}.
     */
    private void envoyCall(HttpServerRequest http, Buffer sent) {
        envoy.decide(JsonCalls.read(sent.toString(java.nio.charset.StandardCharsets.UTF_8))).whenComplete((response, failure) -> {
            Throwable cause = failure instanceof java.util.concurrent.CompletionException ? failure.getCause() : failure;
            if (cause instanceof BadRequest refused) {
                error(http.response(), 400, refused.getMessage());
            } else if (cause != null) { // logged by the service, which decides the gRPC calls too
                error(http.response(), 500, "cannot decide; the server's log says why");
            } else {
                http.response().setStatusCode(JsonCalls.status(response)).putHeader("Content-Type", "application/json")
                        .end(JsonCalls.write(response));
            }
        });
    }

    private static void reply(HttpServerRequest http, Policies policies, CompletionStage<Verdict> verdict,
                              BiConsumer<VerdictAnswer, HttpServerResponse> body) {
        verdict.whenComplete((decided, failure) -> {
            if (failure != null) {
                internalError(http, failure);
                return;
            }
            try {
                VerdictAnswer answer = new VerdictAnswer(decided, policies.config().headers());
                answer.headers().forEach(http.response()::putHeader);
                body.accept(answer, http.response());
            } catch (RuntimeException | Error e) {
                internalError(http, e);
            }
        });
    }

    private static ArrayNode policiesJson(Policies policies) {
        ArrayNode list = JsonNodeFactory.instance.arrayNode();
        for (PolicyConfig policy : policies.config().policies()) {
            ObjectNode item = list.addObject().put("name", policy.name())
                    .put("algorithm", policy.algorithm());
            ArrayNode limits = item.putArray("limits");
            for (Limit limit : policy.limits()) {
                limits.add(limit.toString());
            }
            ArrayNode key = item.putArray("key");
            policy.key().forEach(part -> key.add(part.toString()));
            item.put("mode", policy.mode());
            if (policy.rule() != null && policy.rule().hasMaxDelay()) {
                item.put("max_delay", dev.sluice.DurationFormat.format(policy.rule().maxDelayNanos()));
            }
            // what check prints too: which requests, at what cost (a review found them left out)
            if (policy.costHeader() != null) {
                item.put("cost", "header:" + policy.costHeader());
            } else {
                item.put("cost", policy.cost());
            }
            if (policy.skipIfMissing()) {
                item.put("skip_if_missing", true);
            }
            if (policy.rejectStatus() != PolicyConfig.DEFAULT_REJECT_STATUS) {
                item.put("reject_status", policy.rejectStatus());
            }
            if (policy.rejection().body() != null) {
                item.put("reject_body", policy.rejection().body());
            }
            if (!policy.replaces().isEmpty()) {
                policy.replaces().forEach(item.putArray("replaces")::add);
            }
            if (policy.maxKeys() > 0) {
                item.put("max_keys", policy.maxKeys());
            }
            PolicyConfig.Match match = policy.match();
            if (match.domain() != null) { // a policy for Envoy's rate limit service
                ArrayNode descriptor = item.put("domain", match.domain()).putArray("descriptor");
                match.descriptor().forEach(entry -> descriptor.add(entry.toString()));
            } else if (match.path() != null || match.methods() != null || match.host() != null
                    || match.headers() != null) {
                ObjectNode matched = item.putObject("match");
                if (match.path() != null) {
                    matched.put("path", match.path().toString());
                }
                if (match.methods() != null) {
                    match.methods().forEach(matched.putArray("methods")::add);
                }
                if (match.host() != null) {
                    matched.put("host", match.host());
                }
                if (match.headers() != null) {
                    // a header a policy matches may be a secret a layer before sets (a token that marks internal
                    // callers), and this list answers anyone who reaches the port: masked as the dashboard's keys are
                    ObjectNode headers = matched.putObject("headers");
                    boolean shown = policies.config().dashboardKeysShown();
                    match.headers().forEach((name, value) -> headers.put(name, shown ? value : Dashboard.mask(value)));
                }
            }
        }
        return list;
    }

    static void json(HttpServerResponse response, int status, JsonNode body) {
        response.setStatusCode(status).putHeader("Content-Type", "application/json").end(body.toString());
    }

    static void error(HttpServerResponse response, int status, String message) {
        json(response, status, JsonNodeFactory.instance.objectNode().put("error", message));
    }

    /**
     * A request the HTTP decoder could not read (a line or headers too long, a bad {@code Content-Length}, a control
     * character in a header): the status Vert.x gives it (414, 431, else 400) and the connection closed, as Vert.x
     * does, but with a body that says why, where Vert.x sends none.
     */
    static void malformed(HttpServerRequest request) {
        Throwable cause = request.decoderResult().cause();
        if (cause instanceof Http2Refusal.Preface) {
            Http2Refusal.answer(request.connection());
            return;
        }
        int status = cause instanceof io.netty.handler.codec.http.TooLongHttpLineException ? 414
                : cause instanceof io.netty.handler.codec.http.TooLongHttpHeaderException ? 431 : 400;
        String why = cause == null || cause.getMessage() == null ? "" : ": " + cause.getMessage();
        request.response().putHeader("Connection", "close");
        error(request.response(), status, "malformed request" + why);
    }

    /** {@code /healthz} answers 503 {@code "stopping"} from now on; everything else is served as before. */
    @Override
    public boolean announceStopping() {
        stopping = true;
        return true;
    }

    /** Stops as the process is asked to ({@link Draining}): no new connection, each closed once its answer is over. */
    @Override
    public void startDraining() {
        draining.start();
    }

    /** Waits for the requests being decided (each bounded by its store's timeout) until {@code deadlineNanos}. */
    @Override
    public void awaitDrained(long deadlineNanos) throws InterruptedException {
        draining.await(deadlineNanos);
    }

    /** How it stops; for tests. */
    Draining draining() {
        return draining;
    }

    @Override
    public void close() throws Exception {
        vertx.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
}
