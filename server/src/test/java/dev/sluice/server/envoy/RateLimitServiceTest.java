package dev.sluice.server.envoy;

import com.google.protobuf.UInt64Value;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.WindowEnd;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.LogCapture;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.Code;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.envoyproxy.envoy.type.v3.RateLimitUnit;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Envoy's rate limit service end to end: the gRPC server on an ephemeral port and grpc-java's own client, the stub
 * Envoy's API generates, sending what Envoy sends.
 */
class RateLimitServiceTest {
    static final String CONFIG = """
            headers: [ietf, legacy]
            envoy_headers: [ietf, legacy]
            policies:
              - name: per-address
                match:
                  domain: edge
                  descriptor: [remote_address]
                key: [descriptor:remote_address]
                algorithm: fixed-window
                limits: [3/1m]
              - name: trusted-address
                match:
                  domain: edge
                  descriptor: [remote_address=10.0.0.1]
                key: [descriptor:remote_address]
                algorithm: fixed-window
                limits: [5/1m]
              - name: per-user-path
                match:
                  domain: edge
                  descriptor: [user, path]
                key: [descriptor:user, descriptor:path]
                algorithm: gcra
                limits: [2/1h]
              - name: trial
                match:
                  domain: edge
                  descriptor: [generic_key=trial]
                key: [const:trial]
                algorithm: fixed-window
                limits: [1/1h]
                mode: shadow
              - name: weighted
                match:
                  domain: edge
                  descriptor: [tenant]
                key: [descriptor:tenant]
                algorithm: token-bucket
                limits: [10/1h]
                cost: 3
              - name: bulk
                match:
                  domain: edge
                  descriptor: [bulk]
                key: [descriptor:bulk]
                algorithm: fixed-window
                limits: [100/1h]
              - name: every-http-request
                key: [ip]
                algorithm: fixed-window
                limits: [1/1h]
              - name: paced
                match:
                  domain: edge
                  descriptor: [client]
                key: [descriptor:client]
                algorithm: gcra
                limits: [2/1s, 100/1h]
            """;

    private LiveConfig live;
    private ServiceUnderTest service;
    private EnvoyRateLimitServer server;
    private ManagedChannel channel;
    private RateLimitServiceGrpc.RateLimitServiceBlockingStub envoy;

    @BeforeEach
    void start() throws Exception {
        WindowEnd.awaitFreshMinute(); // the fixed windows of a minute here turn with the wall clock's minute
        live = LiveConfig.of(ConfigLoader.parse("envoy.yaml", CONFIG), new ServerMetrics());
        service = ServiceUnderTest.start(live);
        server = service.server();
        channel = service.channel();
        envoy = service.envoy();
    }

    @AfterEach
    void stop() throws Exception {
        service.close();
        live.close();
    }

    static RateLimitDescriptor descriptor(String... keysAndValues) {
        RateLimitDescriptor.Builder descriptor = RateLimitDescriptor.newBuilder();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            descriptor.addEntries(RateLimitDescriptor.Entry.newBuilder().setKey(keysAndValues[i]).setValue(keysAndValues[i + 1]));
        }
        return descriptor.build();
    }

    private RateLimitResponse ask(String domain, RateLimitDescriptor... descriptors) {
        return envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain(domain)
                .addAllDescriptors(java.util.List.of(descriptors)).build());
    }

    private static Map<String, String> headers(RateLimitResponse response) {
        Map<String, String> headers = new LinkedHashMap<>();
        for (HeaderValue header : response.getResponseHeadersToAddList()) {
            headers.put(header.getKey(), header.getValue());
        }
        return headers;
    }

    /**
     * Of a policy of two limits, the status reports the one closest to rejecting, with its own reset: the second's
     * half-second emission interval, not the 36 s after which the whole key, hour limit and all, is untouched.
     */
    /**
     * Found by trying it: each connection that did not speak gRPC (an HTTP/1.1 request here) logged 25 lines of
     * stack trace; a misdirected health check or a port scanner flooded the log. It is answered, and logged no more;
     * the service goes on answering.
     */
    @Test
    void aClientThatDoesNotSpeakGrpcFillsNoLog() throws Exception {
        try (LogCapture grpc = LogCapture.of("io.grpc")) {
            for (int i = 0; i < 3; i++) {
                try (java.net.Socket socket = new java.net.Socket("127.0.0.1", server.port())) {
                    socket.setSoTimeout(10_000);
                    socket.getOutputStream().write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                            .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    assertThat(socket.getInputStream().readAllBytes()).as("answered (a GOAWAY), then closed").isNotEmpty();
                }
            }
            assertThat(ask("edge", descriptor("client", "quiet")).getOverallCode()).isEqualTo(RateLimitResponse.Code.OK);
            assertThat(grpc.records()).as("nothing logged of those connections").isEmpty();
        }
    }

    @Test
    void theStatusReportsTheResetOfItsLimitNotOfTheKey() {
        RateLimitResponse answer = ask("edge", descriptor("client", "c-1"));
        DescriptorStatus status = answer.getStatuses(0);
        assertThat(status.getCurrentLimit().getRequestsPerUnit()).isEqualTo(2);
        assertThat(status.getCurrentLimit().getUnit()).isEqualTo(Unit.SECOND);
        assertThat(status.getLimitRemaining()).isEqualTo(1);
        // 0.5 s, in whole seconds rounded up as Envoy's service gives it: Envoy reads only the seconds, so a window of
        // a second read as 0 (a review)
        assertThat(status.getDurationUntilReset()).isEqualTo(com.google.protobuf.Duration.newBuilder()
                .setSeconds(1).build());
        assertThat(headers(answer)).containsEntry("RateLimit", "\"paced\";r=1;t=1")
                .containsEntry("RateLimit-Policy", "\"paced\";q=2;w=1, \"paced\";q=100;w=3600")
                .containsEntry("X-RateLimit-Reset", "1");
    }

    @Test
    void aDescriptorIsDecidedByItsPolicyUntilItIsOverTheLimit() {
        for (int remaining = 2; remaining >= 0; remaining--) {
            long before = System.currentTimeMillis();
            RateLimitResponse answer = ask("edge", descriptor("remote_address", "10.0.0.7"));
            long after = System.currentTimeMillis();
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            DescriptorStatus status = answer.getStatuses(0);
            assertThat(status.getCode()).isEqualTo(Code.OK);
            assertThat(status.getCurrentLimit().getName()).isEqualTo("per-address");
            assertThat(status.getCurrentLimit().getRequestsPerUnit()).isEqualTo(3);
            assertThat(status.getCurrentLimit().getUnit()).isEqualTo(Unit.MINUTE);
            assertThat(status.getLimitRemaining()).isEqualTo(remaining);
            // the end of the minute's window, not any wait within a minute (a review found the range that wide)
            dev.sluice.server.WindowEnd.assertSecondsUntilWindowEnd(status.getDurationUntilReset(), 60_000L, before,
                    after);
            assertThat(headers(answer)).containsEntry("RateLimit-Policy", "\"per-address\";q=3;w=60")
                    .containsEntry("X-RateLimit-Limit", "3").containsEntry("X-RateLimit-Remaining", String.valueOf(remaining))
                    .doesNotContainKey("Retry-After");
            assertThat(headers(answer).get("RateLimit")).startsWith("\"per-address\";r=" + remaining + ";t=");
        }
        RateLimitResponse over = ask("edge", descriptor("remote_address", "10.0.0.7"));
        assertThat(over.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(over.getStatuses(0).getCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(over.getStatuses(0).getLimitRemaining()).isZero();
        long retryAfter = Long.parseLong(headers(over).get("Retry-After"));
        assertThat(retryAfter).isBetween(1L, 60L);
        assertThat(headers(over)).containsEntry("X-RateLimit-Remaining", "0");

        // another address has a counter of its own
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.8")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
    }

    /**
     * As Envoy's own service, which sends none unless told: the rate limit headers are added by Envoy to every answer
     * it passes on, and its own enable_x_ratelimit_headers adds X-RateLimit-* again (a review comparing the two
     * found every answer through Envoy carrying five headers more). Retry-After comes with a call over the limit.
     * Over the limit, a status tells nothing remaining and the end of the window, as Envoy's service does, even for
     * hits that no window could hold (the decision's own reset is 0 then: nothing was taken).
     */
    @Test
    void answersCarryNoRateLimitHeadersUnlessToldAndOverTheLimitNothingRemains() throws Exception {
        String config = CONFIG.replace("envoy_headers: [ietf, legacy]\n", "");
        try (LiveConfig quiet = LiveConfig.of(ConfigLoader.parse("envoy.yaml", config), new ServerMetrics());
             ServiceUnderTest plain = ServiceUnderTest.start(quiet)) {
            RateLimitResponse ok = plain.envoy().shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                    .addDescriptors(descriptor("remote_address", "10.9.0.1")).build());
            assertThat(ok.getOverallCode()).isEqualTo(Code.OK);
            assertThat(ok.getResponseHeadersToAddList()).isEmpty();
            long before = System.currentTimeMillis();
            RateLimitResponse tooMany = plain.envoy().shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                    .setHitsAddend(3).addDescriptors(descriptor("remote_address", "10.9.0.1")).build());
            RateLimitResponse never = plain.envoy().shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                    .setHitsAddend(9).addDescriptors(descriptor("remote_address", "10.9.0.2")).build());
            long after = System.currentTimeMillis();
            for (RateLimitResponse over : List.of(tooMany, never)) {
                assertThat(over.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
                DescriptorStatus status = over.getStatuses(0);
                assertThat(status.getLimitRemaining()).as("the decision said %s could still be taken",
                        over == tooMany ? 2 : 3).isZero();
                dev.sluice.server.WindowEnd.assertSecondsUntilWindowEnd(status.getDurationUntilReset(), 60_000L,
                        before, after);
            }
            assertThat(headers(tooMany).keySet()).containsExactly("Retry-After");
            assertThat(headers(never)).as("no wait admits 9 of 3").isEmpty();
        }
    }

    @Test
    void aValueGivenBeatsAnyValueAsInEnvoysOwnService() {
        for (int i = 0; i < 5; i++) {
            DescriptorStatus status = ask("edge", descriptor("remote_address", "10.0.0.1")).getStatuses(0);
            assertThat(status.getCode()).isEqualTo(Code.OK);
            assertThat(status.getCurrentLimit().getName()).isEqualTo("trusted-address");
            assertThat(status.getLimitRemaining()).isEqualTo(4 - i);
        }
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.1")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        // the general policy was never asked about it
        assertThat(live.metrics().scrape())
                .contains("sluice_decisions_total{outcome=\"allowed\",policy=\"trusted-address\"} 5.0")
                .contains("sluice_decisions_total{outcome=\"rejected\",policy=\"trusted-address\"} 1.0")
                .doesNotContainPattern("policy=\"per-address\"} [1-9]");
    }

    /**
     * A review found gRPC's 4 MB message taken, a thousand of which, each sent but its last byte, a connection could
     * hold: a message is at most 1 MiB, and a larger one is refused whole, nothing charged.
     */
    @Test
    void aMessageOverAMebibyteIsRefused() {
        RateLimitRequest.Builder large = RateLimitRequest.newBuilder().setDomain("edge");
        for (int i = 0; i < 3_000; i++) { // 3,000 descriptors of about 420 bytes
            large.addDescriptors(descriptor("bulk", "x".repeat(400) + i));
        }
        assertThat(large.build().getSerializedSize()).isBetween(1 << 20, 2 << 20);
        assertThatThrownBy(() -> envoy.shouldRateLimit(large.build())).isInstanceOf(StatusRuntimeException.class)
                .satisfies(e -> assertThat(((StatusRuntimeException) e).getStatus().getCode())
                        .isEqualTo(Status.Code.RESOURCE_EXHAUSTED));
        assertThat(ask("edge", descriptor("bulk", "x".repeat(400) + 0)).getStatuses(0).getLimitRemaining())
                .as("nothing charged").isEqualTo(99);
    }

    /**
     * A review found a call Envoy had given up on charged to its end: on a slow Redis each charge waits up to
     * store_timeout, and Envoy gives up at its own timeout and lets the request through or not without them. Here
     * Redis is paused while the first charge waits, the caller's deadline passes, and the two policies after it are
     * never asked.
     */
    @Test
    void aCallItsCallerGaveUpOnIsChargedNoFurther() throws Exception {
        try (RedisServer redis = RedisServer.start(); Resp resp = redis.connect();
             LiveConfig onRedis = LiveConfig.of(ConfigLoader.parse("r.yaml", "store: " + redis.uri()
                     + "\nstore_timeout: 3s\n" + CONFIG), new ServerMetrics())) {
            EnvoyRateLimitServer service = EnvoyRateLimitServer.start(onRedis, "127.0.0.1", 0);
            ManagedChannel toService = NettyChannelBuilder.forAddress("127.0.0.1", service.port()).usePlaintext().build();
            try {
                var stub = RateLimitServiceGrpc.newBlockingStub(toService);
                RateLimitRequest three = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("bulk", "given-up")).addDescriptors(descriptor("tenant", "given-up"))
                        .addDescriptors(descriptor("client", "given-up")).build();
                // connected, and the scripts loaded
                stub.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(RateLimitRequest.newBuilder()
                        .setDomain("edge").addDescriptors(descriptor("bulk", "warm")).build());
                resp.call("CLIENT", "PAUSE", "800", "ALL");
                assertThatThrownBy(() -> stub.withDeadlineAfter(200, TimeUnit.MILLISECONDS).shouldRateLimit(three))
                        .isInstanceOf(StatusRuntimeException.class)
                        .satisfies(e -> assertThat(((StatusRuntimeException) e).getStatus().getCode())
                                .isEqualTo(Status.Code.DEADLINE_EXCEEDED));
                Thread.sleep(1_500); // the pause over, and the first charge answered
                RateLimitRequest.Builder look = RateLimitRequest.newBuilder().setDomain("edge");
                for (RateLimitDescriptor one : three.getDescriptorsList()) {
                    look.addDescriptors(one.toBuilder().setHitsAddend(UInt64Value.of(0)));
                }
                RateLimitResponse after = stub.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(look.build());
                assertThat(after.getStatuses(0).getLimitRemaining()).as("the charge in flight: made").isEqualTo(99);
                assertThat(after.getStatuses(1).getLimitRemaining()).as("never asked").isEqualTo(10);
                assertThat(after.getStatuses(2).getLimitRemaining()).as("never asked").isEqualTo(2);
            } finally {
                toService.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                service.close();
            }
        }
    }

    @Test
    void aDescriptorNoPolicyMatchesIsOkWithoutALimit() {
        RateLimitResponse answer = ask("edge", descriptor("remote_address", "10.0.0.7", "path", "/x"),
                descriptor("user", "alice"));
        assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
        assertThat(answer.getStatusesList()).hasSize(2).allSatisfy(status -> {
            assertThat(status.getCode()).isEqualTo(Code.OK);
            assertThat(status.hasCurrentLimit()).isFalse();
        });
        // a policy for HTTP requests (no match: every request) never decides a descriptor, in any domain
        RateLimitResponse elsewhere = ask("other", descriptor("remote_address", "10.0.0.7"));
        assertThat(elsewhere.getOverallCode()).isEqualTo(Code.OK);
        assertThat(elsewhere.getStatuses(0).hasCurrentLimit()).isFalse();
        assertThat(headers(elsewhere)).isEmpty();
    }

    /**
     * A bypass a review found: Envoy sends a descriptor without entries when its actions were all skipped (a
     * request_headers action with skip_if_absent, the header absent). Sluice refused the whole call, and Envoy, failing
     * open by default, let the request through without charging the call's other descriptors. It is OK and charges
     * nothing, as in Envoy's own service; the others are decided.
     */
    @Test
    void aDescriptorWithoutEntriesIsOkAndTheOthersAreDecided() {
        RateLimitDescriptor none = RateLimitDescriptor.getDefaultInstance();
        RateLimitDescriptor address = descriptor("remote_address", "10.0.0.7");
        for (int i = 0; i < 3; i++) {
            RateLimitResponse answer = ask("edge", none, address);
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatuses(0).getCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatuses(0).hasCurrentLimit()).isFalse();
            assertThat(answer.getStatuses(1).getLimitRemaining()).isEqualTo(2 - i);
        }
        RateLimitResponse over = ask("edge", none, address);
        assertThat(over.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(over.getStatuses(0).getCode()).isEqualTo(Code.OK);
        assertThat(over.getStatuses(1).getCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask("edge", none).getOverallCode()).as("alone").isEqualTo(Code.OK);
    }

    @Test
    void hitsAddendIsTheCostAndADescriptorsOwnOverridesTheCalls() {
        RateLimitDescriptor address = descriptor("remote_address", "10.0.0.7");
        RateLimitResponse two = envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                .addDescriptors(address).setHitsAddend(2).build());
        assertThat(two.getStatuses(0).getLimitRemaining()).isEqualTo(1);
        // hits_addend 0 on the descriptor only looks
        RateLimitResponse look = envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge").setHitsAddend(2)
                .addDescriptors(address.toBuilder().setHitsAddend(UInt64Value.of(0))).build());
        assertThat(look.getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(look.getOverallCode()).isEqualTo(Code.OK);
        // more than is left is refused whole, and takes nothing
        RateLimitResponse tooMany = envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge").setHitsAddend(2)
                .addDescriptors(address).build());
        assertThat(tooMany.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        // the headers say what the status says: nothing remains (a review found the 1 a single hit could take)
        assertThat(tooMany.getStatuses(0).getLimitRemaining()).isZero();
        assertThat(headers(tooMany)).containsEntry("X-RateLimit-Remaining", "0");
        assertThat(headers(tooMany).get("RateLimit")).startsWith("\"per-address\";r=0;t=");
        assertThat(ask("edge", address).getStatuses(0).getLimitRemaining()).isZero();
        // a policy's cost is charged once a hit
        RateLimitResponse weighted = envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge").setHitsAddend(2)
                .addDescriptors(descriptor("tenant", "acme")).build());
        assertThat(weighted.getStatuses(0).getLimitRemaining()).isEqualTo(4);
    }

    @Test
    void theFirstRejectionEndsTheCallAndTheDescriptorsAfterItAreNotCharged() {
        RateLimitDescriptor userPath = descriptor("user", "alice", "path", "/reports");
        ask("edge", userPath);
        ask("edge", userPath);
        RateLimitResponse answer = ask("edge", userPath, descriptor("remote_address", "10.0.0.7"));
        assertThat(answer.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(answer.getStatuses(0).getCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(answer.getStatuses(0).getCurrentLimit().getName()).isEqualTo("per-user-path");
        assertThat(answer.getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.HOUR);
        assertThat(answer.getStatuses(0).getDurationUntilReset().getSeconds()).isBetween(3500L, 3600L);
        assertThat(answer.getStatuses(1).getCode()).isEqualTo(Code.UNKNOWN);
        assertThat(answer.getStatuses(1).hasCurrentLimit()).isFalse();
        assertThat(headers(answer)).containsEntry("Retry-After", "1800");
        // the address was not charged: its first request leaves 2 of 3
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.7")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
    }

    @Test
    void aShadowPolicyCountsButNeverRejects() {
        for (int i = 0; i < 3; i++) {
            RateLimitResponse answer = ask("edge", descriptor("generic_key", "trial"));
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatuses(0).getCode()).isEqualTo(Code.OK);
        }
        assertThat(live.metrics().scrape())
                .contains("sluice_decisions_total{outcome=\"allowed\",policy=\"trial\"} 1.0")
                .contains("sluice_decisions_total{outcome=\"shadow_rejected\",policy=\"trial\"} 2.0");
    }

    @Test
    void aMalformedCallIsRefusedNamingTheFieldAndChargesNothing() {
        RateLimitDescriptor good = descriptor("remote_address", "10.0.0.7");
        assertRefused(RateLimitRequest.newBuilder().addDescriptors(good).build(), "domain: must not be empty");
        assertRefused(RateLimitRequest.newBuilder().setDomain("edge").build(),
                "descriptors: at least one descriptor is needed");
        RateLimitRequest.Builder many = RateLimitRequest.newBuilder().setDomain("edge");
        for (int i = 0; i <= RateLimitService.MOST_DESCRIPTORS; i++) {
            many.addDescriptors(good);
        }
        assertRefused(many.build(), "descriptors: at most 10000 in a call, got 10001");
        assertRefused(RateLimitRequest.newBuilder().setDomain("edge").addDescriptors(good)
                .addDescriptors(descriptor("remote_address", "10.0.0.7", "", "x")).build(),
                "descriptors[1].entries[1].key: must not be empty");
        assertRefused(RateLimitRequest.newBuilder().setDomain("edge").addDescriptors(good)
                .addDescriptors(overridden(good, 10, RateLimitUnit.UNKNOWN_VALUE)).build(),
                "descriptors[1].limit.unit: expected one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR, got UNKNOWN");
        assertRefused(RateLimitRequest.newBuilder().setDomain("edge").addDescriptors(good)
                .addDescriptors(overridden(good, 10, 99)).build(),
                "descriptors[1].limit.unit: expected one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR, got 99");
        // none of the calls above took anything
        assertThat(ask("edge", good).getStatuses(0).getLimitRemaining()).isEqualTo(2);
    }

    /**
     * A call of many descriptors is decided off the connection's event loop, so that it holds up no other call of the
     * connections that loop serves (a review measured another client's p99 go from 10 ms to 50 beside calls of 10,000
     * descriptors); its answer is the same. The threads end with the server.
     */
    @Test
    void aLargeCallIsDecidedOffTheEventLoopAndItsThreadsEndWithTheServer() throws Exception {
        EnvoyRateLimitServer own = EnvoyRateLimitServer.start(live, "127.0.0.1", 0);
        ManagedChannel toOwn = NettyChannelBuilder.forAddress("127.0.0.1", own.port()).usePlaintext().build();
        try {
            RateLimitRequest.Builder large = RateLimitRequest.newBuilder().setDomain("edge");
            for (int i = 0; i <= RateLimitService.LARGE_CALL; i++) {
                large.addDescriptors(descriptor("bulk", "large-" + i));
            }
            RateLimitResponse answer = RateLimitServiceGrpc.newBlockingStub(toOwn).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .shouldRateLimit(large.build());
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatusesList()).hasSize(RateLimitService.LARGE_CALL + 1)
                    .allSatisfy(status -> assertThat(status.getLimitRemaining()).isEqualTo(99));
            assertThat(Thread.getAllStackTraces().keySet()).as("decided on a thread of its own")
                    .anyMatch(thread -> thread.getName().startsWith("sluice-envoy-large-"));
        } finally {
            toOwn.shutdownNow();
            own.close();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().startsWith("sluice-envoy-large-"))
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(Thread.getAllStackTraces().keySet()).as("ended with the server")
                .noneMatch(thread -> thread.getName().startsWith("sluice-envoy-large-"));
    }

    /**
     * A look ({@code hits_addend: 0}) at a fixed window nothing has touched yet says when the window ends, as Envoy's
     * service does for every answer; a review found {@code 0s}.
     */
    @Test
    void aLookAtAnUntouchedWindowSaysWhenItEnds() {
        long before = System.currentTimeMillis();
        RateLimitResponse look = ask("edge", descriptor("remote_address", "10.0.0.99").toBuilder()
                .setHitsAddend(UInt64Value.of(0)).build());
        long after = System.currentTimeMillis();
        assertThat(look.getStatuses(0).getLimitRemaining()).isEqualTo(3);
        dev.sluice.server.WindowEnd.assertSecondsUntilWindowEnd(look.getStatuses(0).getDurationUntilReset(), 60_000L,
                before, after);
    }

    /**
     * A hits_addend past what a cost can be (2^64 - 1, or 2^63 - 1 times a policy's cost of 3) is more than any limit
     * holds: OVER_LIMIT for that descriptor, as Envoy's own service answers. A review found it refused as
     * INVALID_ARGUMENT, which Envoy's default failure_mode_deny: false lets through, every other limit of the call
     * with it.
     */
    @Test
    void aHitsAddendPastAnyCostIsOverTheLimitNotAnError() {
        for (RateLimitDescriptor huge : List.of(
                descriptor("remote_address", "10.0.0.8").toBuilder().setHitsAddend(UInt64Value.of(-1)).build(),
                descriptor("tenant", "huge").toBuilder().setHitsAddend(UInt64Value.of(Long.MAX_VALUE)).build())) {
            RateLimitResponse answer = ask("edge", huge);
            assertThat(answer.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
            assertThat(answer.getStatuses(0).getCode()).isEqualTo(Code.OVER_LIMIT);
            assertThat(answer.getStatuses(0).getLimitRemaining()).isZero();
            // and so do the headers, with no Retry-After, as no wait makes it fit (a review found the headers
            // telling the whole limit remaining beside the status's 0)
            assertThat(headers(answer)).containsEntry("X-RateLimit-Remaining", "0").doesNotContainKey("Retry-After");
            // on a key not charged yet the decision's own reset is 0, and the status tells the window's end: the
            // headers tell the same (a review found t=0 and X-RateLimit-Reset: 0, which send a client back at once)
            long untilReset = answer.getStatuses(0).getDurationUntilReset().getSeconds();
            assertThat(untilReset).isPositive();
            assertThat(headers(answer).get("RateLimit")).endsWith(";r=0;t=" + untilReset);
            assertThat(headers(answer)).containsEntry("X-RateLimit-Reset", Long.toString(untilReset));
        }
        // on a key already charged, the headers' reset is the status's, not 0 (the diff review found t=0 there, which
        // tells a client to come back at once)
        ask("edge", descriptor("remote_address", "10.0.0.11"));
        RateLimitResponse charged = ask("edge", descriptor("remote_address", "10.0.0.11").toBuilder()
                .setHitsAddend(UInt64Value.of(-1)).build());
        long untilReset = charged.getStatuses(0).getDurationUntilReset().getSeconds();
        assertThat(untilReset).isPositive();
        assertThat(headers(charged).get("RateLimit")).endsWith(";r=0;t=" + untilReset);
        // nothing taken: the whole limit is still there
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.8")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
        assertThat(ask("edge", descriptor("tenant", "huge")).getStatuses(0).getLimitRemaining()).isEqualTo(7);
    }

    /**
     * A past bug: a message protobuf cannot read was answered {@code UNKNOWN} "Application error processing RPC",
     * and grpc-java logged its stack trace as SEVERE.
     */
    @Test
    void aMessageThatIsNotARateLimitRequestIsRefusedSayingWhyAndLogsNoError() throws Exception {
        List<java.util.logging.LogRecord> logged = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Logger grpc = java.util.logging.Logger.getLogger("io.grpc");
        java.util.logging.Handler handler = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord record) {
                if (record.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue()) {
                    logged.add(record);
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        grpc.addHandler(handler);
        try {
            // field 1 (domain), 5 bytes long, but only one follows
            assertUnreadable(new byte[] {0x0A, 0x05, 'e'}, "the message is not a RateLimitRequest: While parsing a"
                    + " protocol message, the input ended unexpectedly in the middle of a field.  This could mean"
                    + " either that the input has been truncated or that an embedded message misreported its own"
                    + " length.");
            // field 1 (domain), one byte that is not UTF-8
            assertUnreadable(new byte[] {0x0A, 0x01, (byte) 0xFF},
                    "the message is not a RateLimitRequest: Protocol message had invalid UTF-8.");
            // a field number of 0
            assertUnreadable(new byte[] {0x00},
                    "the message is not a RateLimitRequest: Protocol message contained an invalid tag (zero).");
        } finally {
            grpc.removeHandler(handler);
        }
        assertThat(logged).extracting(java.util.logging.LogRecord::getMessage).isEmpty();
        // the service still answers, and nothing was charged
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.7")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
    }

    /** Sends {@code bytes} as the body of a ShouldRateLimit call, and expects it refused with {@code message}. */
    private void assertUnreadable(byte[] bytes, String message) {
        io.grpc.MethodDescriptor.Marshaller<byte[]> raw = new io.grpc.MethodDescriptor.Marshaller<>() {
            @Override
            public java.io.InputStream stream(byte[] value) {
                return new java.io.ByteArrayInputStream(value);
            }

            @Override
            public byte[] parse(java.io.InputStream stream) {
                try {
                    return stream.readAllBytes();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        };
        io.grpc.MethodDescriptor<byte[], byte[]> method = RateLimitServiceGrpc.getShouldRateLimitMethod()
                .toBuilder(raw, raw).build();
        assertThatThrownBy(() -> io.grpc.stub.ClientCalls.blockingUnaryCall(channel, method,
                io.grpc.CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), bytes))
                .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                    assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
                    assertThat(e.getStatus().getDescription()).isEqualTo(message);
                });
    }

    /** {@code descriptor} with a limit override of {@code amount} a unit (the unit by its number in Envoy's enum). */
    static RateLimitDescriptor overridden(RateLimitDescriptor descriptor, int amount, int unit) {
        return descriptor.toBuilder().setLimit(RateLimitDescriptor.RateLimitOverride.newBuilder()
                .setRequestsPerUnit(amount).setUnitValue(unit)).build();
    }

    @Test
    void aLimitOverrideDecidesItsDescriptorInsteadOfThePolicies() {
        RateLimitDescriptor address = overridden(descriptor("remote_address", "10.0.0.7"), 2, RateLimitUnit.MINUTE_VALUE);
        for (int remaining = 1; remaining >= 0; remaining--) {
            RateLimitResponse answer = ask("edge", address);
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            DescriptorStatus status = answer.getStatuses(0);
            assertThat(status.getCurrentLimit().getName()).isEqualTo("edge/override");
            assertThat(status.getCurrentLimit().getRequestsPerUnit()).isEqualTo(2);
            assertThat(status.getCurrentLimit().getUnit()).isEqualTo(Unit.MINUTE);
            assertThat(status.getLimitRemaining()).isEqualTo(remaining);
            assertThat(headers(answer)).containsEntry("RateLimit-Policy", "\"edge/override\";q=2;w=60");
        }
        RateLimitResponse over = ask("edge", address);
        assertThat(over.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        // fixed windows aligned to the epoch, as Envoy's are: the window ends on the minute
        assertEndsOnAWhole(over.getStatuses(0).getDurationUntilReset(), 60_000);
        // the policy of the address was not asked: it has all of its 3 left
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.7")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
        // counted per descriptor and per limit: another address, or another override, starts afresh
        assertThat(ask("edge", overridden(descriptor("remote_address", "10.0.0.8"), 2, RateLimitUnit.MINUTE_VALUE))
                .getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask("edge", overridden(descriptor("remote_address", "10.0.0.7"), 5, RateLimitUnit.MINUTE_VALUE))
                .getStatuses(0).getLimitRemaining()).isEqualTo(4);
        // a descriptor no policy takes is limited too, hits_addend is its cost, and Envoy's WEEK (7) is understood
        RateLimitResponse weekly = envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge").setHitsAddend(3)
                .addDescriptors(overridden(descriptor("user", "bob"), 4, 7)).build());
        assertThat(weekly.getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.WEEK);
        assertThat(weekly.getStatuses(0).getLimitRemaining()).isEqualTo(1);
        // in a domain no policy names there are no limits, the call's own included, as in Envoy's service
        RateLimitResponse elsewhere = ask("other", address);
        assertThat(elsewhere.getOverallCode()).isEqualTo(Code.OK);
        assertThat(elsewhere.getStatuses(0).hasCurrentLimit()).isFalse();
        assertThat(live.metrics().scrape())
                .contains("sluice_decisions_total{outcome=\"allowed\",policy=\"edge/override\"} 5.0")
                .contains("sluice_decisions_total{outcome=\"rejected\",policy=\"edge/override\"} 1.0");
    }

    @Test
    void anOverrideOfNoRequestsPutsTheCallOverTheLimitAndChargesNothing() {
        RateLimitDescriptor good = descriptor("remote_address", "10.0.0.7");
        RateLimitResponse answer = ask("edge", good, overridden(descriptor("user", "eve"), 0, RateLimitUnit.HOUR_VALUE),
                overridden(descriptor("user", "mallory"), 0, RateLimitUnit.UNKNOWN_VALUE + 1));
        assertThat(answer.getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(answer.getStatusesList()).extracting(DescriptorStatus::getCode)
                .containsExactly(Code.UNKNOWN, Code.OVER_LIMIT, Code.UNKNOWN);
        DescriptorStatus none = answer.getStatuses(1);
        assertThat(none.getCurrentLimit().getName()).isEqualTo("edge/override");
        assertThat(none.getCurrentLimit().getRequestsPerUnit()).isZero();
        assertThat(none.getCurrentLimit().getUnit()).isEqualTo(Unit.HOUR);
        assertThat(none.getLimitRemaining()).isZero();
        // until the end of the hour, as windows aligned to the epoch
        assertEndsOnAWhole(none.getDurationUntilReset(), 3_600_000);
        assertThat(live.metrics().scrape()).contains("sluice_decisions_total{outcome=\"rejected\",policy=\"edge/override\"} 1.0");
        // the address before it was not charged
        assertThat(ask("edge", good).getStatuses(0).getLimitRemaining()).isEqualTo(2);
        // where there are no limits, there are none
        assertThat(ask("other", overridden(descriptor("user", "eve"), 0, RateLimitUnit.HOUR_VALUE)).getOverallCode())
                .isEqualTo(Code.OK);
        // a look (hits_addend 0) at a limit of 0 is OK, as in Envoy's service, where 0 hits are not over 0
        assertThat(ask("edge", overridden(descriptor("user", "eve"), 0, RateLimitUnit.HOUR_VALUE).toBuilder()
                .setHitsAddend(UInt64Value.of(0)).build()).getOverallCode()).isEqualTo(Code.OK);
    }

    @Test
    void aCallOfManyDescriptorsIsDecidedWhole() {
        // a past bug: each decision the in-memory store had made at once was taken one continuation deeper, and a
        // call of 1,200 descriptors overflowed the stack (INTERNAL: StackOverflowError)
        RateLimitRequest.Builder many = RateLimitRequest.newBuilder().setDomain("edge");
        for (int i = 0; i < RateLimitService.MOST_DESCRIPTORS; i++) {
            many.addDescriptors(descriptor("bulk", "b-" + i));
        }
        RateLimitResponse answer = envoy.shouldRateLimit(many.build());
        assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
        assertThat(answer.getStatusesList()).hasSize(RateLimitService.MOST_DESCRIPTORS).allSatisfy(status -> {
            assertThat(status.getCurrentLimit().getName()).isEqualTo("bulk");
            assertThat(status.getLimitRemaining()).isEqualTo(99);
        });
        // the quota is told once, not once a descriptor (a review found it repeated 10,000 times)
        assertThat(headers(answer)).containsEntry("RateLimit-Policy", "\"bulk\";q=100;w=3600");
    }

    /** A policy that decides several descriptors of a call is one item of RateLimit-Policy, among the others. */
    @Test
    void aPolicyDecidingTwoDescriptorsIsListedOnce() {
        RateLimitResponse answer = ask("edge", descriptor("bulk", "one"), descriptor("remote_address", "10.0.0.9"),
                descriptor("bulk", "two"), descriptor("remote_address", "10.0.0.10"));
        assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
        assertThat(headers(answer)).containsEntry("RateLimit-Policy",
                "\"bulk\";q=100;w=3600, \"per-address\";q=3;w=60");
    }

    @Test
    void overridesPastTheLimitersKeptForThemLoseNoCount() {
        RateLimitDescriptor once = overridden(descriptor("user", "carol"), 1, RateLimitUnit.HOUR_VALUE);
        assertThat(ask("edge", once).getOverallCode()).isEqualTo(Code.OK);
        RateLimitRequest.Builder many = RateLimitRequest.newBuilder().setDomain("edge");
        for (int amount = 2; amount <= 1_200; amount++) { // more limits than the 1,024 limiters kept
            many.addDescriptors(overridden(descriptor("user", "dave"), amount, RateLimitUnit.HOUR_VALUE));
        }
        RateLimitResponse answer = envoy.shouldRateLimit(many.build());
        assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
        assertThat(answer.getStatusesList()).hasSize(1_199).allSatisfy(status ->
                assertThat(status.getLimitRemaining()).isEqualTo(status.getCurrentLimit().getRequestsPerUnit() - 1));
        // the count lives in the store, not in the limiter made again
        assertThat(ask("edge", once).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
    }

    /** That {@code reset} from now ends on a whole {@code unitMs} since the epoch (within 2 s). */
    private static void assertEndsOnAWhole(com.google.protobuf.Duration reset, long unitMs) {
        long endsAtMs = System.currentTimeMillis() + reset.getSeconds() * 1_000 + reset.getNanos() / 1_000_000;
        assertThat(Math.floorMod(endsAtMs + unitMs / 2, unitMs) - unitMs / 2).as("ms from a whole unit of " + unitMs
                + " ms").isBetween(-2_000L, 2_000L);
    }

    private void assertRefused(RateLimitRequest request, String message) {
        assertThatThrownBy(() -> envoy.shouldRateLimit(request)).isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
            assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
            assertThat(e.getStatus().getDescription()).isEqualTo(message);
        });
    }

    @Test
    void manyCallersAtOnceNeverGetMoreThanTheLimit() throws Exception {
        java.util.concurrent.ExecutorService callers = java.util.concurrent.Executors.newFixedThreadPool(8);
        java.util.concurrent.atomic.AtomicInteger admitted = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger refused = new java.util.concurrent.atomic.AtomicInteger();
        try {
            java.util.List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
            for (int thread = 0; thread < 8; thread++) {
                done.add(callers.submit(() -> {
                    for (int call = 0; call < 40; call++) {
                        Code code = ask("edge", descriptor("bulk", "one")).getOverallCode();
                        (code == Code.OK ? admitted : refused).incrementAndGet();
                    }
                }));
            }
            for (java.util.concurrent.Future<?> one : done) {
                one.get(60, TimeUnit.SECONDS);
            }
        } finally {
            callers.shutdownNow();
        }
        assertThat(admitted.get()).isEqualTo(100);
        assertThat(refused.get()).isEqualTo(220);
    }

    @Test
    void thePoliciesInForceShowTheDomainAndPatternTheyDecide() throws Exception {
        try (dev.sluice.server.http.ApiServer api = dev.sluice.server.http.ApiServer.start(live, "127.0.0.1", 0)) {
            String body = java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create("http://127.0.0.1:" + api.port() + "/v1/policies")).build(),
                    java.net.http.HttpResponse.BodyHandlers.ofString()).body();
            assertThat(body).contains("{\"name\":\"trusted-address\",\"algorithm\":\"fixed-window\",\"limits\":[\"5/1m\"],"
                    + "\"key\":[\"descriptor:remote_address\"],\"mode\":\"reject\",\"cost\":1,\"domain\":\"edge\","
                    + "\"descriptor\":[\"remote_address=10.0.0.1\"]}")
                    .contains("{\"name\":\"every-http-request\",\"algorithm\":\"fixed-window\",\"limits\":[\"1/1h\"],"
                    + "\"key\":[\"ip\"],\"mode\":\"reject\",\"cost\":1}");
        }
    }

    @Test
    void envoysUnitsAreThePeriodsOfExactlyOneOfThem() {
        assertThat(RateLimitService.unit(1_000_000_000L)).isEqualTo(Unit.SECOND);
        assertThat(RateLimitService.unit(60_000_000_000L)).isEqualTo(Unit.MINUTE);
        assertThat(RateLimitService.unit(3_600_000_000_000L)).isEqualTo(Unit.HOUR);
        assertThat(RateLimitService.unit(86_400_000_000_000L)).isEqualTo(Unit.DAY);
        assertThat(RateLimitService.unit(7 * 86_400_000_000_000L)).isEqualTo(Unit.WEEK);
        assertThat(RateLimitService.unit(30 * 86_400_000_000_000L)).isEqualTo(Unit.MONTH);
        assertThat(RateLimitService.unit(365 * 86_400_000_000_000L)).isEqualTo(Unit.YEAR);
        assertThat(RateLimitService.unit(10_000_000_000L)).isEqualTo(Unit.UNKNOWN);
        assertThat(RateLimitService.unit(1_000_000_001L)).isEqualTo(Unit.UNKNOWN);
    }

    /**
     * A server about to stop ({@code --stop-delay}) tells gRPC's health checks so, and goes on answering calls: Envoy
     * takes it out before it stops taking them.
     */
    @Test
    void aServerAboutToStopSaysSoInItsHealthAndGoesOnAnswering() {
        HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
        server.announceStopping();
        for (String service : new String[] {"", "envoy.service.ratelimit.v3.RateLimitService"}) {
            assertThat(health.check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus())
                    .as("service \"%s\"", service).isEqualTo(ServingStatus.NOT_SERVING);
        }
        assertThat(ask("edge", descriptor("remote_address", "10.0.0.99")).getOverallCode())
                .isEqualTo(RateLimitResponse.Code.OK);
    }

    @Test
    void grpcsHealthServiceAnswersForTheServerAndTheRateLimitService() throws Exception {
        HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
        for (String service : new String[] {"", "envoy.service.ratelimit.v3.RateLimitService"}) {
            assertThat(health.check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus())
                    .as("service \"%s\"", service).isEqualTo(ServingStatus.SERVING);
        }
        assertThatThrownBy(() -> health.check(HealthCheckRequest.newBuilder().setService("nothing.Here").build()))
                .isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND));
        // a watcher (Envoy's health checks, Kubernetes' probes) hears a closing server stop serving
        java.util.concurrent.BlockingQueue<ServingStatus> heard = new java.util.concurrent.LinkedBlockingQueue<>();
        java.util.concurrent.CompletableFuture<Status> ended = new java.util.concurrent.CompletableFuture<>();
        HealthGrpc.newStub(channel).watch(HealthCheckRequest.newBuilder()
                .setService("envoy.service.ratelimit.v3.RateLimitService").build(), new io.grpc.stub.StreamObserver<>() {
                    @Override
                    public void onNext(io.grpc.health.v1.HealthCheckResponse response) {
                        heard.add(response.getStatus());
                    }

                    @Override
                    public void onError(Throwable t) {
                        ended.complete(Status.fromThrowable(t));
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
        assertThat(heard.poll(10, TimeUnit.SECONDS)).isEqualTo(ServingStatus.SERVING);
        java.util.concurrent.CompletableFuture<Void> closing = java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                server.close();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(heard.poll(10, TimeUnit.SECONDS)).isEqualTo(ServingStatus.NOT_SERVING);
        // then the watch is ended by the closing server, not left to hold its shutdown for gRPC's wait (five
        // seconds, then a cancel): a past weakness
        assertThat(ended.get(30, TimeUnit.SECONDS)).satisfies(status -> {
            assertThat(status.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
            assertThat(status.getDescription()).isEqualTo("the server is shutting down");
        });
        closing.get(30, TimeUnit.SECONDS);
    }

    /**
     * Stopped as the process is asked to ({@code SIGTERM}): a call under way (here waiting on a Redis busy for a
     * second) is answered; a new connection is refused, as gRPC's graceful shutdown refuses it, so that Envoy sends
     * its calls elsewhere; the wait ends with the last call, not at its deadline.
     */
    @Test
    void aStoppedServiceAnswersTheCallUnderWayAndTakesNoNewOne() throws Exception {
        try (RedisServer redis = RedisServer.start();
             LiveConfig onRedis = LiveConfig.of(ConfigLoader.parse("r.yaml", "store: " + redis.uri()
                     + "\nstore_timeout: 5s\n" + CONFIG), new ServerMetrics());
             ServiceUnderTest stopping = ServiceUnderTest.start(onRedis)) {
            RateLimitRequest request = RateLimitRequest.newBuilder().setDomain("edge")
                    .addDescriptors(descriptor("user", "erin", "path", "/a")).build();
            assertThat(stopping.envoy().shouldRateLimit(request).getOverallCode()).isEqualTo(Code.OK);
            var busy = redis.sleep("1");
            Thread.sleep(100);
            var underWay = RateLimitServiceGrpc.newFutureStub(stopping.channel()).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .shouldRateLimit(request);
            Thread.sleep(200); // the call waits on Redis
            long started = System.nanoTime();
            stopping.server().startDraining();
            // a new connection is not taken (a call on the old one may still slip in with gRPC's first GOAWAY, which
            // leaves room for the calls the client had already sent)
            ManagedChannel late = NettyChannelBuilder.forAddress("127.0.0.1", stopping.port()).usePlaintext().build();
            try {
                assertThatThrownBy(() -> RateLimitServiceGrpc.newBlockingStub(late).withDeadlineAfter(5,
                        TimeUnit.SECONDS).shouldRateLimit(request)).isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
            } finally {
                late.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            stopping.server().awaitDrained(System.nanoTime() + TimeUnit.SECONDS.toNanos(20));
            assertThat(underWay.get(1, TimeUnit.SECONDS).getOverallCode()).as("answered").isEqualTo(Code.OK);
            assertThat(underWay.get().getStatuses(0).getLimitRemaining()).isZero();
            assertThat(System.nanoTime() - started).as("over with the call, not at the deadline")
                    .isLessThan(TimeUnit.SECONDS.toNanos(5));
            busy.get(10, java.util.concurrent.TimeUnit.SECONDS);
        }
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "on_store_failure: {0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"open", "closed"})
    void aStoreThatIsDownIsDecidedByTheFailurePolicyAndDecisionsResumeWhenItIsBack(String policy) throws Exception {
        try (RedisServer redis = RedisServer.start();
             LiveConfig onRedis = LiveConfig.of(ConfigLoader.parse("r.yaml", "store: " + redis.uri()
                     + "\non_store_failure: " + policy + "\nstore_timeout: 500ms\n" + CONFIG), new ServerMetrics())) {
            EnvoyRateLimitServer service = EnvoyRateLimitServer.start(onRedis, "127.0.0.1", 0);
            ManagedChannel toService = NettyChannelBuilder.forAddress("127.0.0.1", service.port()).usePlaintext().build();
            try {
                var stub = RateLimitServiceGrpc.newBlockingStub(toService);
                RateLimitRequest request = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("user", "carol", "path", "/a")).build();
                assertThat(stub.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(request).getStatuses(0)
                        .getLimitRemaining()).isEqualTo(1);
                redis.kill();
                for (int i = 0; i < 3; i++) {
                    long started = System.nanoTime();
                    RateLimitResponse down = stub.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(request);
                    assertThat(down.getOverallCode()).isEqualTo(policy.equals("open") ? Code.OK : Code.OVER_LIMIT);
                    // no limit nor count: nothing is known of the key, and Envoy's X-RateLimit headers skip it
                    assertThat(down.getStatuses(0).hasCurrentLimit()).isFalse();
                    assertThat(down.getStatuses(0).getLimitRemaining()).isZero();
                    assertThat(System.nanoTime() - started).as("no call waits past the store's timeout")
                            .isLessThan(3_000_000_000L);
                }
                assertThat(onRedis.metrics().scrape()).containsPattern("sluice_fail_" + policy + "_total [1-9]");
                // still serving: on_store_failure decides, not Envoy's failure_mode_deny
                assertThat(HealthGrpc.newBlockingStub(toService).withDeadlineAfter(5, TimeUnit.SECONDS)
                        .check(HealthCheckRequest.getDefaultInstance()).getStatus()).as("while the store is down")
                        .isEqualTo(ServingStatus.SERVING);
                redis.restart();
                // Redis came back empty: the limit starts afresh, decided by the store again
                RateLimitRequest fresh = request.toBuilder().setDescriptors(0, descriptor("user", "dave", "path", "/a")).build();
                long giveUp = System.nanoTime() + 30_000_000_000L;
                DescriptorStatus status;
                do { // until the circuit breaker lets calls through: failing open, a call is admitted with no limit
                     // and failing closed refused, so only the store can say "OK, none left"
                    Thread.sleep(100);
                    status = stub.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(fresh).getStatuses(0);
                } while (!(status.getCode() == Code.OK && status.hasCurrentLimit() && status.getLimitRemaining() == 0)
                        && System.nanoTime() < giveUp);
                assertThat(status.getCode()).isEqualTo(Code.OK);
                assertThat(status.getLimitRemaining()).isZero();
            } finally {
                toService.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                service.close();
            }
        }
    }

    @Test
    void anEditOfTheFileAppliesToTheNextCall(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path file = java.nio.file.Files.writeString(dir.resolve("sluice.yaml"), CONFIG);
        try (LiveConfig fromFile = LiveConfig.load(file, new ServerMetrics())) {
            EnvoyRateLimitServer service = EnvoyRateLimitServer.start(fromFile, "127.0.0.1", 0);
            ManagedChannel toService = NettyChannelBuilder.forAddress("127.0.0.1", service.port()).usePlaintext().build();
            try {
                var stub = RateLimitServiceGrpc.newBlockingStub(toService).withDeadlineAfter(10, TimeUnit.SECONDS);
                RateLimitRequest request = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("remote_address", "10.0.0.9")).build();
                assertThat(stub.shouldRateLimit(request).getStatuses(0).getCurrentLimit().getRequestsPerUnit()).isEqualTo(3);
                java.nio.file.Files.writeString(file, CONFIG.replace("limits: [3/1m]", "limits: [1/1s]"));
                assertThat(fromFile.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
                // both calls in one second's window: a CI run saw the second call begin the next one, admitted
                dev.sluice.server.WindowEnd.awaitFreshWindow(1_000, 1_000);
                DescriptorStatus now = stub.shouldRateLimit(request).getStatuses(0);
                assertThat(now.getCurrentLimit().getRequestsPerUnit()).isEqualTo(1);
                assertThat(now.getCurrentLimit().getUnit()).isEqualTo(Unit.SECOND);
                assertThat(now.getLimitRemaining()).isZero(); // a new limit starts afresh: this was its first request
                assertThat(stub.shouldRateLimit(request).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
            } finally {
                toService.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                service.close();
            }
        }
    }

    @Test
    void twoServicesOnOneRedisShareTheLimit() throws Exception {
        try (RedisServer redis = RedisServer.start();
             LiveConfig onRedis = LiveConfig.of(ConfigLoader.parse("r.yaml", "store: " + redis.uri()
                     + "\nstore_timeout: 2s\n" + CONFIG), new ServerMetrics());
             LiveConfig alsoOnRedis = LiveConfig.of(ConfigLoader.parse("r.yaml", "store: " + redis.uri()
                     + "\nstore_timeout: 2s\n" + CONFIG), new ServerMetrics())) {
            EnvoyRateLimitServer one = EnvoyRateLimitServer.start(onRedis, "127.0.0.1", 0);
            EnvoyRateLimitServer two = EnvoyRateLimitServer.start(alsoOnRedis, "127.0.0.1", 0);
            ManagedChannel toOne = NettyChannelBuilder.forAddress("127.0.0.1", one.port()).usePlaintext().build();
            ManagedChannel toTwo = NettyChannelBuilder.forAddress("127.0.0.1", two.port()).usePlaintext().build();
            try {
                RateLimitRequest request = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("user", "bob", "path", "/a")).build();
                var first = RateLimitServiceGrpc.newBlockingStub(toOne).withDeadlineAfter(10, TimeUnit.SECONDS);
                var second = RateLimitServiceGrpc.newBlockingStub(toTwo).withDeadlineAfter(10, TimeUnit.SECONDS);
                assertThat(first.shouldRateLimit(request).getStatuses(0).getLimitRemaining()).isEqualTo(1);
                assertThat(second.shouldRateLimit(request).getStatuses(0).getLimitRemaining()).isZero();
                assertThat(first.shouldRateLimit(request).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
                assertThat(second.shouldRateLimit(request).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
                // a limit the call brings is shared alike
                RateLimitRequest overriding = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(overridden(descriptor("user", "bob"), 1, RateLimitUnit.HOUR_VALUE)).build();
                assertThat(second.shouldRateLimit(overriding).getOverallCode()).isEqualTo(Code.OK);
                assertThat(first.shouldRateLimit(overriding).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
                // a month is within what the Redis store keeps exact, a year is not: refused, nothing charged
                RateLimitRequest monthly = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(overridden(descriptor("user", "ann"), 1, RateLimitUnit.MONTH_VALUE)).build();
                assertThat(first.shouldRateLimit(monthly).getStatuses(0).getCurrentLimit().getUnit())
                        .isEqualTo(Unit.MONTH);
                RateLimitRequest yearly = RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("user", "cy"))
                        .addDescriptors(overridden(descriptor("user", "cy"), 5, RateLimitUnit.YEAR_VALUE)).build();
                assertThatThrownBy(() -> second.shouldRateLimit(yearly)).isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> {
                            assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
                            assertThat(e.getStatus().getDescription()).isEqualTo("descriptors[1].limit: limit 5/365d is"
                                    + " beyond the Redis store: its period is 2^53 ns (104.2 days) or longer (Lua's numbers are exact"
                                    + " only up to 2^53)");
                        });
                try (Resp resp = redis.connect()) {
                    assertThat((List<?>) resp.call("KEYS", "*cy*")).isEmpty();
                }
            } finally {
                toOne.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                toTwo.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                one.close();
                two.close();
            }
        }
    }
}
