package dev.sluice.server.envoy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.Descriptors;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.util.JsonFormat;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.request.BadRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;

import java.util.Iterator;
import java.util.Map;
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

    /**
     * The call {@code json} writes, or a {@link BadRequest} that says why it is none. Each field is first checked to
     * be of its kind, as Envoy's service checks it: protobuf-java's reader takes a string for a number and a number,
     * a boolean or an array of one value for a string ({@code "domain": ["edge"]}), where Go's answers 400 (a review
     * found such calls decided and charged). Then protobuf's reader, on the text as sent, converts and bounds them.
     */
    public static RateLimitRequest read(String json) {
        JsonNode tree;
        try {
            tree = TREES.readTree(json);
        } catch (JsonProcessingException e) {
            throw new BadRequest("the body is not JSON: " + e.getOriginalMessage());
        }
        if (tree == null) {
            throw new BadRequest("the body is not JSON: it is empty");
        }
        checkKinds(tree, RateLimitRequest.getDescriptor(), "");
        RateLimitRequest.Builder request = RateLimitRequest.newBuilder();
        try {
            READER.merge(json, request);
        } catch (InvalidProtocolBufferException e) {
            throw new BadRequest("the body is not a RateLimitRequest: " + e.getMessage());
        }
        return request.build();
    }

    /** Reads numbers as written ({@code 7.70}, not 7.7), to be quoted so in a message. */
    private static final ObjectMapper TREES = com.fasterxml.jackson.databind.json.JsonMapper.builder()
            .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .nodeFactory(com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true)).build();

    /**
     * Checks that {@code json} is an object of {@code type} as protobuf's JSON writes it, each field known (by its name
     * or its JSON name) and of its kind, naming the first that is not; {@code null} stands for a field's default.
     */
    private static void checkKinds(JsonNode json, Descriptors.Descriptor type, String path) {
        if (!json.isObject()) {
            throw new BadRequest(where(path) + "expected an object (" + type.getName() + "), got " + kind(json));
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = json.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            String field = path.isEmpty() ? member.getKey() : path + "." + member.getKey();
            FieldDescriptor known = field(type, member.getKey());
            if (known == null) {
                throw new BadRequest(field + ": no such field in " + type.getFullName());
            }
            JsonNode value = member.getValue();
            if (value.isNull()) {
                continue;
            }
            if (known.isRepeated()) {
                if (!value.isArray()) {
                    throw new BadRequest(field + ": expected an array, got " + kind(value));
                }
                for (int i = 0; i < value.size(); i++) {
                    checkKind(value.get(i), known, field + "[" + i + "]");
                }
            } else {
                checkKind(value, known, field);
            }
        }
    }

    private static void checkKind(JsonNode value, FieldDescriptor field, String path) {
        switch (field.getJavaType()) {
            case STRING -> expect(value.isTextual(), "a string", value, path);
            // protobuf's JSON takes a number written as a string too ("2"); its reader bounds it after
            case INT, LONG -> expect(value.isNumber() || value.isTextual() && NUMBER.matcher(value.asText()).matches(),
                    "a whole number", value, path);
            case BOOLEAN -> expect(value.isBoolean(), "true or false", value, path);
            case ENUM -> expect(value.isTextual() || value.isIntegralNumber(), "one of "
                    + field.getEnumType().getValues().stream().map(Descriptors.EnumValueDescriptor::getName).toList(),
                    value, path);
            case MESSAGE -> {
                Descriptors.Descriptor type = field.getMessageType();
                if (type.getFullName().startsWith("google.protobuf.") && type.getName().endsWith("Value")) {
                    checkKind(value, type.findFieldByName("value"), path); // a wrapper is written as its value
                } else {
                    checkKinds(value, type, path);
                }
            }
            default -> expect(value.isNumber() || value.isTextual(), "a number", value, path);
        }
    }

    private static void expect(boolean fits, String expected, JsonNode value, String path) {
        if (!fits) {
            throw new BadRequest(path + ": expected " + expected + ", got " + kind(value));
        }
    }

    /** The field of {@code type} named {@code name}, as in the .proto or as protobuf's JSON names it; null if none. */
    private static FieldDescriptor field(Descriptors.Descriptor type, String name) {
        FieldDescriptor field = type.findFieldByName(name);
        if (field != null) {
            return field;
        }
        for (FieldDescriptor each : type.getFields()) {
            if (each.getJsonName().equals(name)) {
                return each;
            }
        }
        return null;
    }

    private static String where(String path) {
        return path.isEmpty() ? "the body: " : path + ": ";
    }

    /** A number as JSON writes one, the only text protobuf's JSON reads as a number (besides its own words). */
    private static final java.util.regex.Pattern NUMBER =
            java.util.regex.Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");

    private static String kind(JsonNode value) {
        if (value.isTextual()) {
            String text = value.asText();
            return "the string \"" + (text.length() > 40 ? text.substring(0, 40) + "..." : text) + "\"";
        }
        if (value.isNumber()) {
            return "the number " + value.asText();
        }
        if (value.isBoolean()) {
            return "a boolean";
        }
        if (value.isArray()) {
            return "an array";
        }
        if (value.isObject()) {
            return "an object";
        }
        return "null";
    }

    /** {@code response} as protobuf's JSON, its characters written as Envoy's service writes them ({@link #plain}). */
    public static String write(RateLimitResponse response) {
        try {
            return plain(WRITER.print(response));
        } catch (InvalidProtocolBufferException e) { // only for an Any of an unknown type, which the answer has none of
            throw new IllegalStateException(e);
        }
    }

    /**
     * {@code json} with the characters Java's printer escapes for HTML ({@code = < > & '}, as {@code \u003d} and
     * so on) written as themselves, as Envoy's service (Go's protojson) writes them: a review found
     * {@code "RateLimit-Policy"}'s {@code q=3} answered as {@code q\u003d3}. Each escape is read whole, so an escaped
     * backslash followed by {@code u003d} stays as it was.
     */
    static String plain(String json) {
        if (json.indexOf('\\') < 0) {
            return json;
        }
        StringBuilder out = new StringBuilder(json.length());
        for (int i = 0; i < json.length(); i++) {
            char c = json.charAt(i);
            if (c != '\\' || i + 1 >= json.length()) {
                out.append(c);
                continue;
            }
            if (json.charAt(i + 1) == 'u' && i + 6 <= json.length()) {
                String hex = json.substring(i + 2, i + 6);
                char escaped = switch (hex) {
                    case "003d" -> '=';
                    case "003c" -> '<';
                    case "003e" -> '>';
                    case "0026" -> '&';
                    case "0027" -> '\'';
                    default -> 0;
                };
                if (escaped != 0) {
                    out.append(escaped);
                    i += 5;
                    continue;
                }
            }
            out.append(c).append(json.charAt(i + 1)); // any other escape, whole
            i++;
        }
        return out.toString();
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
