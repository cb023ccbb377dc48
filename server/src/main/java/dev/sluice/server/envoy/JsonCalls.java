package dev.sluice.server.envoy;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.util.JsonFormat;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.request.BadRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Envoy's rate limit calls over HTTP/1, as Envoy's own service answers them at {@code POST /json} for clients that
 * cannot speak gRPC (a Lua script, {@code curl}): the body is a {@code RateLimitRequest} written as protobuf's JSON,
 * the answer its {@code RateLimitResponse} the same way, decided exactly as the gRPC call is ({@link RateLimitService}).
 * The HTTP status is Envoy's: 200 for {@code OK}, 429 for {@code OVER_LIMIT}.
 *
 * <p>Protobuf's JSON takes a field by its name or by its JSON name ({@code hits_addend} or {@code hitsAddend}), and
 * writes the JSON name, leaving out what holds its default value (a {@code limitRemaining} of 0), as Envoy's service
 * (Go's {@code protojson}) does. A field it does not know, or a value of the wrong kind, is a 400 that names it, where
 * Envoy's service answers a bare "Bad Request".
 */
public final class JsonCalls {
    private static final JsonFormat.Parser READER = JsonFormat.parser();
    private static final JsonFormat.Printer WRITER = JsonFormat.printer().omittingInsignificantWhitespace();

    private final RateLimitService service;

    public JsonCalls(LiveConfig live) {
        this.service = new RateLimitService(live);
    }

    /** The call {@code json} writes, or a {@link BadRequest} that says why it is none. */
    public static RateLimitRequest read(String json) {
        RateLimitRequest.Builder request = RateLimitRequest.newBuilder();
        try {
            READER.merge(json, request);
        } catch (InvalidProtocolBufferException e) {
            throw new BadRequest("the body is not a RateLimitRequest: " + e.getMessage());
        }
        return request.build();
    }

    /** {@code response} as protobuf's JSON. */
    public static String write(RateLimitResponse response) {
        try {
            return WRITER.print(response);
        } catch (InvalidProtocolBufferException e) { // only for an Any of an unknown type, which the answer has none of
            throw new IllegalStateException(e);
        }
    }

    /** The HTTP status Envoy's service gives an answer: 200, 429 over the limit, 500 for a code it cannot tell. */
    public static int status(RateLimitResponse response) {
        return switch (response.getOverallCode()) {
            case OK -> 200;
            case OVER_LIMIT -> 429;
            default -> 500;
        };
    }

    /**
     * Decides {@code request} as the gRPC call is decided: the answer, or a failure that is a {@link BadRequest} (a
     * call refused, naming the field) or a fault of Sluice's own (logged by the service).
     */
    public CompletionStage<RateLimitResponse> decide(RateLimitRequest request) {
        CompletableFuture<RateLimitResponse> answered = new CompletableFuture<>();
        service.shouldRateLimit(request, new StreamObserver<>() {
            @Override
            public void onNext(RateLimitResponse response) {
                answered.complete(response);
            }

            @Override
            public void onError(Throwable failure) {
                Status status = Status.fromThrowable(failure);
                answered.completeExceptionally(status.getCode() == Status.Code.INVALID_ARGUMENT
                        ? new BadRequest(status.getDescription()) : failure);
            }

            @Override
            public void onCompleted() {
            }
        });
        return answered;
    }
}
