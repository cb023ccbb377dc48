package dev.sluice.server.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.Decision;
import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.server.Policies;
import dev.sluice.server.config.PolicyConfig;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;

import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The HTTP API of {@code sluice serve} (spec/server.md): {@code POST /v1/check}, {@code GET /v1/policies},
 * {@code GET /healthz}. Decisions go through the limiter's async face: the in-memory store answers at once,
 * and the Redis store answers when Redis does (or its timeout passes) without holding the event loop.
 */
public final class CheckServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long MAX_BODY = 64 * 1024;
    private static final Set<String> CHECK_FIELDS = Set.of("policy", "key", "cost");

    private final Vertx vertx;
    private final HttpServer server;
    private final Policies policies;

    private CheckServer(Vertx vertx, HttpServer server, Policies policies) {
        this.vertx = vertx;
        this.server = server;
        this.policies = policies;
    }

    /** Starts listening on {@code host:port} (port 0: any free port). */
    public static CheckServer start(Policies policies, String host, int port) throws Exception {
        Vertx vertx = Vertx.vertx();
        CheckServer[] started = new CheckServer[1];
        // HTTP/1.1: a client's h2c upgrade request (java.net.http asks for one by default) is answered in HTTP/1.1
        HttpServer server = vertx.createHttpServer(new HttpServerOptions().setHttp2ClearTextEnabled(false));
        server.requestHandler(request -> started[0].answer(request));
        started[0] = new CheckServer(vertx, server, policies);
        try {
            server.listen(port, host).toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            vertx.close();
            throw e;
        }
        return started[0];
    }

    /** The port it listens on. */
    public int port() {
        return server.actualPort();
    }

    /** Answers every request, whatever happens: a bug becomes a 500 with a line in the log, never a hang. */
    private void answer(HttpServerRequest request) {
        try {
            handle(request);
        } catch (RuntimeException | Error e) {
            internalError(request, e);
        }
    }

    private static void internalError(HttpServerRequest request, Throwable e) {
        System.getLogger(CheckServer.class.getName()).log(System.Logger.Level.ERROR,
                "failed to answer " + request.method() + " " + request.path(), e);
        if (!request.response().ended()) {
            error(request.response(), 500, "internal error: " + e);
        }
    }

    private void handle(HttpServerRequest request) {
        String path = request.path();
        switch (path) {
            case "/v1/check" -> {
                if (request.method() != HttpMethod.POST) {
                    error(request.response(), 405, "use POST for " + path);
                    return;
                }
                request.body().onSuccess(body -> {
                            try {
                                check(request, body);
                            } catch (RuntimeException | Error e) {
                                internalError(request, e);
                            }
                        })
                        .onFailure(e -> error(request.response(), 400, "cannot read the body: " + e.getMessage()));
            }
            case "/v1/policies" -> {
                if (request.method() != HttpMethod.GET) {
                    error(request.response(), 405, "use GET for " + path);
                    return;
                }
                json(request.response(), 200, policiesJson());
            }
            case "/healthz" -> json(request.response(), 200, JSON.createObjectNode().put("status", "ok"));
            default -> error(request.response(), 404, "no such endpoint: " + request.method() + " " + path);
        }
    }

    private void check(HttpServerRequest http, Buffer body) {
        HttpServerResponse response = http.response();
        if (body.length() > MAX_BODY) {
            error(response, 413, "the body is larger than " + MAX_BODY + " bytes");
            return;
        }
        JsonNode request;
        try {
            request = JSON.readTree(body.getBytes());
        } catch (JsonProcessingException e) {
            error(response, 400, "the body is not JSON: " + e.getOriginalMessage());
            return;
        } catch (java.io.IOException e) {
            error(response, 400, "the body is not JSON");
            return;
        }
        if (request == null || !request.isObject()) {
            error(response, 400, "the body must be a JSON object such as {\"policy\": \"api\", \"key\": \"user-42\"}");
            return;
        }
        for (Iterator<String> names = request.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!CHECK_FIELDS.contains(name)) {
                error(response, 400, "unknown field \"" + name + "\": expected policy, key and optionally cost");
                return;
            }
        }
        JsonNode policyNode = request.get("policy");
        if (policyNode == null || !policyNode.isTextual()) {
            error(response, 400, "policy: expected the name of a policy as a string");
            return;
        }
        JsonNode keyNode = request.get("key");
        if (keyNode == null || !keyNode.isTextual() || keyNode.asText().isEmpty()) {
            error(response, 400, "key: expected a non-empty string");
            return;
        }
        long cost = 1;
        JsonNode costNode = request.get("cost");
        if (costNode != null) {
            if (!costNode.isIntegralNumber() || !costNode.canConvertToLong() || costNode.asLong() < 0) {
                error(response, 400, "cost: expected a whole number >= 0, got " + costNode);
                return;
            }
            cost = costNode.asLong();
        }
        String name = policyNode.asText();
        PolicyConfig policy = policies.policy(name);
        if (policy == null) {
            error(response, 404, "policy: no policy named \"" + name + "\"");
            return;
        }
        policies.limiter(name).tryAcquireAsync(Policies.storedKey(name, keyNode.asText()), cost)
                .whenComplete((decision, failure) -> {
                    if (failure != null) {
                        internalError(http, failure);
                    } else {
                        answer(response, policy, decision);
                    }
                });
    }

    /** The answer of spec/server.md for a decision: status, body and headers. */
    private void answer(HttpServerResponse response, PolicyConfig policy, Decision decision) {
        boolean rejected = !decision.allowed() && !policy.shadow();
        ObjectNode answer = JSON.createObjectNode()
                .put("allowed", !rejected)
                .put("policy", policy.name())
                .put("limit", decision.limit().amount())
                .put("remaining", decision.remaining())
                .put("retry_after_ms", DurationFormat.toMillisCeil(decision.retryAfterNanos()))
                .put("reset_after_ms", DurationFormat.toMillisCeil(decision.resetAfterNanos()))
                .put("delay_ms", DurationFormat.toMillisCeil(decision.delayNanos()));
        if (policy.shadow() && !decision.allowed()) {
            answer.put("shadow_rejected", true);
        }
        Map<String, String> headers = RateLimitHeaders.of(policy, decision, rejected, policies.config().headers());
        if (decision.never()) {
            headers.remove("Retry-After"); // no wait makes it fit: a Retry-After would be a lie
        }
        headers.forEach(response::putHeader);
        json(response, rejected ? 429 : 200, answer);
    }

    private ArrayNode policiesJson() {
        ArrayNode list = JSON.createArrayNode();
        for (PolicyConfig policy : policies.config().policies()) {
            ObjectNode item = list.addObject().put("name", policy.name())
                    .put("algorithm", policy.rule().algorithm().label());
            ArrayNode limits = item.putArray("limits");
            for (Limit limit : policy.rule().limits()) {
                limits.add(limit.toString());
            }
            ArrayNode key = item.putArray("key");
            policy.key().forEach(key::add);
            item.put("mode", policy.shadow() ? "shadow" : policy.rule().mode().label());
        }
        return list;
    }

    private static void json(HttpServerResponse response, int status, JsonNode body) {
        response.setStatusCode(status).putHeader("Content-Type", "application/json").end(body.toString());
    }

    private static void error(HttpServerResponse response, int status, String message) {
        json(response, status, JSON.createObjectNode().put("error", message));
    }

    @Override
    public void close() throws Exception {
        vertx.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
}
