package dev.sluice.server.envoy;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.WindowEnd;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.metrics.ServerMetrics;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.Code;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static dev.sluice.server.envoy.RateLimitServiceTest.descriptor;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;

/**
 * Envoy's own rate limit configuration files ({@code envoy_configs}), read as Envoy's service reads them and decided
 * over gRPC as Envoy's service decides them: the tree walked entry by entry (a value named, then a wildcard, then any
 * value), {@code unlimited}, {@code shadow_mode}, {@code replaces}, every unit, and hot reload of the files.
 */
class EnvoyConfigFilesTest {
    /** An Envoy rate limit service configuration, as its own documentation writes them. */
    private static final String EDGE = """
            domain: edge
            descriptors:
              # every address, 3 a minute; one address without a limit
              - key: remote_address
                rate_limit:
                  unit: minute
                  requests_per_unit: 3
              - key: remote_address
                value: 10.0.0.1
                rate_limit:
                  unlimited: true

              # nested: a user of the checkout, alice with a limit of her own
              - key: generic_key
                value: checkout
                descriptors:
                  - key: user
                    value: alice
                    rate_limit: {unit: hour, requests_per_unit: 5}
                  - key: user
                    rate_limit: {unit: hour, requests_per_unit: 2}

              # Envoy's walk: once a=1 is taken, [a, b] is out of the running
              - key: a
                value: "1"
                descriptors:
                  - key: b
                    value: "2"
                    rate_limit: {unit: hour, requests_per_unit: 1}
              - key: a
                descriptors:
                  - key: b
                    rate_limit: {unit: hour, requests_per_unit: 1}

              # a wildcard value, and a shadow limit for the rest
              - key: plan
                value: premium*
                rate_limit: {unit: second, requests_per_unit: 100}
              - key: plan
                rate_limit: {unit: second, requests_per_unit: 1}
                shadow_mode: true
                detailed_metric: true

              # one limit replaces another when both are in a call
              - key: api_key
                rate_limit: {unit: hour, requests_per_unit: 2, name: per-key}
              - key: tier
                value: gold
                rate_limit:
                  unit: hour
                  requests_per_unit: 100
                  name: gold
                  replaces:
                    - name: per-key

              - key: quota
                rate_limit: {unit: month, requests_per_unit: 1000}
              - key: yearly
                rate_limit: {unit: YEAR, requests_per_unit: 10}
              - key: weekly
                rate_limit: {unit: week, requests_per_unit: 10}
              - key: daily
                rate_limit: {unit: day, requests_per_unit: 10}
            """;

    @TempDir
    Path dir;
    private LiveConfig live;
    private EnvoyRateLimitServer server;
    private ManagedChannel channel;
    private RateLimitServiceGrpc.RateLimitServiceBlockingStub envoy;

    private void start(String sluiceYaml) throws Exception {
        WindowEnd.awaitFreshMinute(); // counts in windows of a minute, turned by the wall clock
        Path file = dir.resolve("sluice.yaml");
        Files.writeString(file, sluiceYaml);
        live = LiveConfig.load(file, new ServerMetrics());
        server = EnvoyRateLimitServer.start(live, "127.0.0.1", 0);
        channel = NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
        envoy = RateLimitServiceGrpc.newBlockingStub(channel);
    }

    @AfterEach
    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (server != null) {
            server.close();
        }
        if (live != null) {
            live.close();
        }
    }

    private RateLimitResponse ask(RateLimitDescriptor... descriptors) {
        return envoy.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(RateLimitRequest.newBuilder()
                .setDomain("edge").addAllDescriptors(List.of(descriptors)).build());
    }

    private void startOnEdge() throws Exception {
        Files.createDirectories(dir.resolve("ratelimit"));
        Files.writeString(dir.resolve("ratelimit/edge.yaml"), EDGE);
        start("envoy_configs: [ratelimit]\n");
    }

    @Test
    void eachLimitOfTheTreeIsAFixedWindowPolicyNamedAsEnvoyNamesItsStatistics() throws Exception {
        startOnEdge();
        assertThat(live.policies().config().policies()).extracting(PolicyConfig::name, PolicyConfig::counterSignature,
                PolicyConfig::mode).containsExactly(
                tuple("edge.remote_address", "fixed-window 3/1m", "reject"),
                tuple("edge.generic_key_checkout.user_alice", "fixed-window 5/1h", "reject"),
                tuple("edge.generic_key_checkout.user", "fixed-window 2/1h", "reject"),
                tuple("edge.a_1.b_2", "fixed-window 1/1h", "reject"),
                tuple("edge.a.b", "fixed-window 1/1h", "reject"),
                tuple("edge.plan_premium_", "fixed-window 100/1s", "reject"),
                tuple("edge.plan", "fixed-window 1/1s", "shadow"),
                tuple("per-key", "fixed-window 2/1h", "reject"),
                tuple("gold", "fixed-window 100/1h", "reject"),
                tuple("edge.quota", "fixed-window 1000/30d", "reject"),
                tuple("edge.yearly", "fixed-window 10/365d", "reject"),
                tuple("edge.weekly", "fixed-window 10/7d", "reject"),
                tuple("edge.daily", "fixed-window 10/1d", "reject"));
        PolicyConfig nested = live.policies().policy("edge.generic_key_checkout.user");
        assertThat(nested.key()).hasToString("[descriptor:generic_key, descriptor:user]");
        assertThat(nested.match().domain()).isEqualTo("edge");
        assertThat(nested.match().descriptor()).hasToString("[generic_key=checkout, user]");
    }

    @Test
    void aKeyWithoutValueCountsEachValueOnItsOwnAndAnUnlimitedValueIsNeverCounted() throws Exception {
        startOnEdge();
        for (int remaining = 2; remaining >= 0; remaining--) {
            DescriptorStatus status = ask(descriptor("remote_address", "10.0.0.7")).getStatuses(0);
            assertThat(status.getCode()).isEqualTo(Code.OK);
            assertThat(status.getCurrentLimit().getName()).isEqualTo("edge.remote_address");
            assertThat(status.getCurrentLimit().getUnit()).isEqualTo(Unit.MINUTE);
            assertThat(status.getCurrentLimit().getRequestsPerUnit()).isEqualTo(3);
            assertThat(status.getLimitRemaining()).isEqualTo(remaining);
            // a window of a minute, aligned to the minute as Envoy's are
            assertThat(status.getDurationUntilReset().getSeconds()).isBetween(0L, 60L);
        }
        assertThat(ask(descriptor("remote_address", "10.0.0.7")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("remote_address", "10.0.0.8")).getStatuses(0).getLimitRemaining()).isEqualTo(2);
        for (int i = 0; i < 10; i++) {
            RateLimitResponse unlimited = ask(descriptor("remote_address", "10.0.0.1"));
            assertThat(unlimited.getOverallCode()).isEqualTo(Code.OK);
            assertThat(unlimited.getStatuses(0).hasCurrentLimit()).isFalse();
            // all a uint32 holds, as Envoy's service tells an unlimited descriptor from one no limit takes (a review)
            assertThat(Integer.toUnsignedLong(unlimited.getStatuses(0).getLimitRemaining())).isEqualTo(0xFFFF_FFFFL);
        }
        assertThat(ask(descriptor("nothing", "here")).getStatuses(0).getLimitRemaining()).as("no limit: 0").isZero();
    }

    @Test
    void nestedDescriptorsTakeTheValueNamedFirstAndAnyValueElse() throws Exception {
        startOnEdge();
        for (int i = 0; i < 5; i++) {
            assertThat(ask(descriptor("generic_key", "checkout", "user", "alice")).getStatuses(0).getCurrentLimit()
                    .getName()).isEqualTo("edge.generic_key_checkout.user_alice");
        }
        assertThat(ask(descriptor("generic_key", "checkout", "user", "alice")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("generic_key", "checkout", "user", "bob")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("generic_key", "checkout", "user", "bob")).getStatuses(0).getLimitRemaining()).isZero();
        assertThat(ask(descriptor("generic_key", "checkout", "user", "bob")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("generic_key", "checkout", "user", "carol")).getOverallCode()).isEqualTo(Code.OK);
        // shorter or longer than the tree, or another value on top: no limit
        for (RateLimitDescriptor none : List.of(descriptor("generic_key", "checkout"),
                descriptor("generic_key", "checkout", "user", "bob", "path", "/x"), descriptor("generic_key", "cart", "user", "bob"))) {
            RateLimitResponse answer = ask(none);
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatuses(0).hasCurrentLimit()).as("%s", none).isFalse();
        }
    }

    @Test
    void aValueNamedTakesTheWalkEvenWhereItLeadsNowhereAsInEnvoysService() throws Exception {
        startOnEdge();
        // a=1 is taken, and under it only b=2: a=1, b=3 has no limit, though [a, b] would fit it
        for (int i = 0; i < 3; i++) {
            RateLimitResponse answer = ask(descriptor("a", "1", "b", "3"));
            assertThat(answer.getOverallCode()).isEqualTo(Code.OK);
            assertThat(answer.getStatuses(0).hasCurrentLimit()).isFalse();
        }
        assertThat(ask(descriptor("a", "1", "b", "2")).getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge.a_1.b_2");
        assertThat(ask(descriptor("a", "2", "b", "3")).getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge.a.b");
        assertThat(ask(descriptor("a", "2", "b", "3")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
    }

    @Test
    void aWildcardValueTakesEveryValueWithItsPrefixAndShadowLimitsNeverRefuse() throws Exception {
        startOnEdge();
        for (String plan : List.of("premium", "premium-gold", "premium-silver")) {
            DescriptorStatus status = ask(descriptor("plan", plan)).getStatuses(0);
            assertThat(status.getCurrentLimit().getName()).as(plan).isEqualTo("edge.plan_premium_");
            assertThat(status.getCurrentLimit().getUnit()).isEqualTo(Unit.SECOND);
        }
        // the shadow limit of 1 a second: the second call would be refused, and is only counted
        for (int i = 0; i < 3; i++) {
            RateLimitResponse basic = ask(descriptor("plan", "basic"));
            assertThat(basic.getOverallCode()).isEqualTo(Code.OK);
            assertThat(basic.getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge.plan");
        }
        assertThat(live.metrics().scrape()).containsPattern(
                "sluice_decisions_total\\{outcome=\"shadow_rejected\",policy=\"edge.plan\"} [1-9]");
    }

    @Test
    void aLimitThatReplacesAnotherInTheSameCallLeavesItUncharged() throws Exception {
        startOnEdge();
        for (int i = 0; i < 5; i++) {
            RateLimitResponse both = ask(descriptor("api_key", "k1"), descriptor("tier", "gold"));
            assertThat(both.getOverallCode()).isEqualTo(Code.OK);
            assertThat(both.getStatuses(0).hasCurrentLimit()).isFalse();
            assertThat(both.getStatuses(1).getCurrentLimit().getName()).isEqualTo("gold");
            assertThat(both.getStatuses(1).getLimitRemaining()).isEqualTo(99 - i);
        }
        // alone, the key's own limit applies, and was never charged above
        assertThat(ask(descriptor("api_key", "k1")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("api_key", "k1")).getStatuses(0).getLimitRemaining()).isZero();
        assertThat(ask(descriptor("api_key", "k1")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
    }

    @Test
    void everyUnitOfEnvoysServiceIsAPeriodAndComesBackAsItsUnit() throws Exception {
        startOnEdge();
        assertThat(ask(descriptor("quota", "q")).getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.MONTH);
        assertThat(ask(descriptor("yearly", "y")).getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.YEAR);
        assertThat(ask(descriptor("weekly", "w")).getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.WEEK);
        assertThat(ask(descriptor("daily", "d")).getStatuses(0).getCurrentLimit().getUnit()).isEqualTo(Unit.DAY);
        DescriptorStatus hourly = ask(descriptor("generic_key", "checkout", "user", "zoe")).getStatuses(0);
        assertThat(hourly.getCurrentLimit().getUnit()).isEqualTo(Unit.HOUR);
        // windows aligned to the epoch, as Envoy's: a minute's ends on the minute, a month's every 30 days from 1970
        for (Object[] unit : new Object[][] {{"remote_address", 60_000L}, {"quota", 30L * 86_400_000L},
                {"yearly", 365L * 86_400_000L}, {"weekly", 7L * 86_400_000L}}) {
            long period = (Long) unit[1];
            long before = System.currentTimeMillis();
            com.google.protobuf.Duration reset = ask(descriptor((String) unit[0], "aligned")).getStatuses(0)
                    .getDurationUntilReset();
            long after = System.currentTimeMillis();
            WindowEnd.assertSecondsUntilWindowEnd(reset, period, before, after);
        }
    }

    /** Envoy's rules where the walk, the counters and replaces are least obvious, each in a file Envoy takes. */
    private static final String QUIRKS = """
            domain: edge
            descriptors:
              # the first wildcard in file order: an unlimited one before a limited one (a bad unit beside
              # unlimited is passed over, as Envoy's service passes it over)
              - key: plan
                value: premium-*
                rate_limit: {unlimited: True, unit: fortnight}
              - key: plan
                value: prem*
                rate_limit: {unit: hour, requests_per_unit: 1}
              # share_threshold: every value of the wildcard on one counter; without it, one each
              - key: team
                value: red-*
                share_threshold: yes
                value_to_metric: on
                rate_limit: {unit: hour, requests_per_unit: 2}
              - key: squad
                value: blue-*
                rate_limit: {unit: hour, requests_per_unit: 2}
              # and in the limits below the shared wildcard, as in Envoy's service (a review found them not shared)
              - key: path
                value: /files/*
                share_threshold: true
                descriptors:
                  - key: user
                    rate_limit: {unit: hour, requests_per_unit: 2}
              # a node without limit and with no descriptors still takes the walk from [region]
              - key: region
                value: eu
                descriptors: []
              - key: region
                rate_limit: {unit: hour, requests_per_unit: 1}
              # replaces: a limit without a name is never replaced; an unlimited limit replaces too
              - key: api_key
                rate_limit: {unit: hour, requests_per_unit: 1}
              - key: vip
                rate_limit:
                  unlimited: true
                  name: vip
                  replaces: [{name: per-user}, {name: edge.api_key}]
              - key: user
                rate_limit: {unit: hour, requests_per_unit: 1, name: per-user}
            """;

    @Test
    void envoysRulesWhereTheyAreLeastObvious() throws Exception {
        Files.writeString(dir.resolve("quirks.yaml"), QUIRKS);
        start("envoy_configs: [quirks.yaml]\n");
        for (int i = 0; i < 3; i++) {
            assertThat(ask(descriptor("plan", "premium-gold")).getStatuses(0).hasCurrentLimit()).isFalse();
        }
        assertThat(ask(descriptor("plan", "premier")).getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge.plan_prem_");
        assertThat(ask(descriptor("plan", "premier")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);

        assertThat(ask(descriptor("team", "red-1")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("team", "red-2")).getStatuses(0).getLimitRemaining()).isZero();
        assertThat(ask(descriptor("team", "red-3")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("squad", "blue-1")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("squad", "blue-2")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("path", "/files/a", "user", "u")).getStatuses(0).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("path", "/files/b", "user", "u")).getStatuses(0).getLimitRemaining()).isZero();
        assertThat(ask(descriptor("path", "/files/c", "user", "u")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("path", "/files/c", "user", "v")).getStatuses(0).getLimitRemaining())
                .as("each user on his own").isEqualTo(1);

        for (int i = 0; i < 3; i++) {
            assertThat(ask(descriptor("region", "eu")).getStatuses(0).hasCurrentLimit()).isFalse();
        }
        assertThat(ask(descriptor("region", "us")).getOverallCode()).isEqualTo(Code.OK);
        assertThat(ask(descriptor("region", "us")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);

        RateLimitResponse unnamed = ask(descriptor("api_key", "k"), descriptor("vip", "x"));
        assertThat(unnamed.getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge.api_key");
        assertThat(ask(descriptor("api_key", "k"), descriptor("vip", "x")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        for (int i = 0; i < 3; i++) {
            RateLimitResponse replaced = ask(descriptor("user", "u"), descriptor("vip", "x"));
            assertThat(replaced.getOverallCode()).isEqualTo(Code.OK);
            assertThat(replaced.getStatusesList()).allSatisfy(status -> assertThat(status.hasCurrentLimit()).isFalse());
        }
        assertThat(ask(descriptor("user", "u")).getStatuses(0).getLimitRemaining()).as("never charged before").isZero();
    }

    @Test
    void aDirectoryIsReadToItsDepthPassingOverNamesThatStartWithADot() throws Exception {
        Path config = dir.resolve("config");
        Files.createDirectories(config.resolve("nested"));
        Files.createDirectories(config.resolve("..data"));
        Files.writeString(config.resolve("nested/edge.conf"), EDGE);
        Files.writeString(config.resolve("..data/edge.yaml"), EDGE); // a ConfigMap's own copy: read once, not twice
        Files.writeString(config.resolve(".hidden.yaml"), "not: read");
        start("envoy_configs: [config]\n");
        assertThat(live.policies().policy("edge.remote_address")).isNotNull();
    }

    /**
     * A limit of 0 requests, or none given, blocks every hit, as in Envoy's service, whose README blocks an address
     * so; refused before, a file that did could not be read (a review comparing the two). Each call is OVER_LIMIT,
     * charging nothing; its status reports the limit of 0, nothing remaining, the end of its window; a look (hits 0)
     * is OK; hits no cost could hold are over the limit too, not refused; no policy stands for it.
     */
    @Test
    void aLimitOfNoRequestsBlocksEveryHitAsInEnvoysService() throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), """
                domain: edge
                descriptors:
                  - key: remote_address
                    value: 50.0.0.5
                    rate_limit: {unit: minute, requests_per_unit: 0}
                  - key: remote_address
                    value: 60.0.0.6
                    rate_limit: {unit: hour}
                  - key: remote_address
                    rate_limit: {unit: minute, requests_per_unit: 3}
                  - key: user
                    rate_limit:
                """);
        start("envoy_configs: [edge.yaml]\n");
        for (String[] blocked : new String[][] {{"50.0.0.5", "60000"}, {"60.0.0.6", "3600000"}}) {
            for (int i = 0; i < 3; i++) {
                long before = System.currentTimeMillis();
                RateLimitResponse answer = ask(descriptor("remote_address", blocked[0]));
                long after = System.currentTimeMillis();
                assertThat(answer.getOverallCode()).as(blocked[0]).isEqualTo(Code.OVER_LIMIT);
                RateLimitResponse.DescriptorStatus status = answer.getStatuses(0);
                assertThat(status.getCurrentLimit().getRequestsPerUnit()).isZero();
                assertThat(status.getLimitRemaining()).isZero();
                WindowEnd.assertSecondsUntilWindowEnd(status.getDurationUntilReset(), Long.parseLong(blocked[1]),
                        before, after);
            }
            RateLimitResponse look = envoy.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(RateLimitRequest
                    .newBuilder().setDomain("edge").addDescriptors(descriptor("remote_address", blocked[0]).toBuilder()
                            .setHitsAddend(com.google.protobuf.UInt64Value.of(0))).build());
            assertThat(look.getOverallCode()).as("a look").isEqualTo(Code.OK);
            RateLimitResponse huge = envoy.withDeadlineAfter(10, TimeUnit.SECONDS).shouldRateLimit(RateLimitRequest
                    .newBuilder().setDomain("edge").addDescriptors(descriptor("remote_address", blocked[0]).toBuilder()
                            .setHitsAddend(com.google.protobuf.UInt64Value.of(1L << 62))).build());
            assertThat(huge.getOverallCode()).as("hits past any cost").isEqualTo(Code.OVER_LIMIT);
            assertThat(huge.getResponseHeadersToAddList()).isEmpty();
        }
        assertThat(live.policies().config().policies()).extracting(PolicyConfig::name).doesNotContain(
                "edge.remote_address_50.0.0.5", "edge.remote_address_60.0.0.6");
        assertThat(ask(descriptor("remote_address", "10.0.0.1")).getStatuses(0).getLimitRemaining())
                .as("the others as configured").isEqualTo(2);
        assertThat(ask(descriptor("user", "u")).getStatuses(0).hasCurrentLimit()).as("rate_limit: left empty is none")
                .isFalse();
        assertThat(live.metrics().scrape()).contains("sluice_decisions_total{outcome=\"rejected\",policy=\"edge.remote_address_50.0.0.5\"} 4.0");
    }

    /** value: ~ is no value to Envoy's service (YAML's null): any value of the key, each counted apart. */
    @Test
    void aNullValueIsNoValue() throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), "domain: edge\ndescriptors:\n  - key: user\n    value: ~\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 1}\n");
        start("envoy_configs: [edge.yaml]\n");
        assertThat(ask(descriptor("user", "alice")).getOverallCode()).isEqualTo(Code.OK);
        assertThat(ask(descriptor("user", "alice")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("user", "bob")).getOverallCode()).isEqualTo(Code.OK);
        assertThat(ask(descriptor("user", "~")).getOverallCode()).as("~ is a value like any").isEqualTo(Code.OK);
    }

    @Test
    void theWatcherSeesTheFilesAndEachRefusalIsToldOnceUntilTheFileIsRight() throws Exception {
        startOnEdge();
        Path edge = dir.resolve("ratelimit/edge.yaml");
        // the directory emptied, then every limit set unlimited: no limit, and every call OK, as in Envoy's service
        // (refused before, they kept the old limits in force: a review)
        Files.delete(edge);
        assertThat(live.reload()).as("the directory emptied").isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(live.policies().config().policies()).isEmpty();
        Files.writeString(edge, "domain: edge\ndescriptors: [{key: remote_address, rate_limit: {unlimited: true}}]\n");
        assertThat(live.reload()).as("no limit left").isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        for (int i = 0; i < 5; i++) {
            assertThat(ask(descriptor("remote_address", "10.0.0.7")).getOverallCode()).isEqualTo(Code.OK);
        }
        Files.writeString(edge, "domain: edge\ndescriptors: [{key: a, rate_limit: {unit: fortnight, requests_per_unit: 1}}]\n");
        assertThat(live.reload()).as("a bad file").isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        Files.writeString(edge, EDGE);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(ask(descriptor("remote_address", "10.0.0.7")).getStatuses(0).getCurrentLimit().getRequestsPerUnit())
                .isEqualTo(3);

        live.watch(java.time.Duration.ofMillis(100));
        Files.writeString(edge, EDGE.replace("requests_per_unit: 3", "requests_per_unit: 9"));
        long giveUp = System.nanoTime() + 10_000_000_000L;
        while (!live.policies().policy("edge.remote_address").counterSignature().equals("fixed-window 9/1m")
                && System.nanoTime() < giveUp) {
            Thread.sleep(50);
        }
        assertThat(live.policies().policy("edge.remote_address").counterSignature()).isEqualTo("fixed-window 9/1m");
    }

    @Test
    void sluicesOwnPoliciesAndEnvoysFilesStandSideBySide() throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), EDGE);
        start("""
                policies:
                  - name: per-ip
                    key: [ip]
                    algorithm: gcra
                    limits: [10/1s]
                  - name: edge-tenant
                    match: {domain: edge, descriptor: [tenant]}
                    key: [descriptor:tenant]
                    algorithm: token-bucket
                    limits: [4/1h]
                envoy_configs: [edge.yaml]
                """);
        assertThat(live.policies().config().policies()).hasSize(15);
        assertThat(ask(descriptor("tenant", "t1")).getStatuses(0).getCurrentLimit().getName()).isEqualTo("edge-tenant");
        assertThat(ask(descriptor("remote_address", "10.0.0.9")).getStatuses(0).getCurrentLimit().getName())
                .isEqualTo("edge.remote_address");
    }

    /**
     * A review found a domain whose file has no descriptors taken for a domain without limits: the limits calls
     * bring for its descriptors (Envoy's overrides) charged nothing. In Envoy's service the domain exists, and they
     * apply; a limit of 0 puts the call over the limit.
     */
    @Test
    void aDomainWithoutDescriptorsTakesTheLimitsCallsBring() throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), EDGE);
        Files.writeString(dir.resolve("quiet.yaml"), "domain: quiet\n");
        start("envoy_configs: [edge.yaml, quiet.yaml]\n");
        RateLimitDescriptor once = RateLimitServiceTest.overridden(descriptor("user", "u1"), 1,
                io.envoyproxy.envoy.type.v3.RateLimitUnit.MINUTE_VALUE);
        RateLimitRequest call = RateLimitRequest.newBuilder().setDomain("quiet").addDescriptors(once).build();
        assertThat(envoy.shouldRateLimit(call).getOverallCode()).isEqualTo(Code.OK);
        assertThat(envoy.shouldRateLimit(call).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        RateLimitDescriptor none = RateLimitServiceTest.overridden(descriptor("user", "u2"), 0,
                io.envoyproxy.envoy.type.v3.RateLimitUnit.HOUR_VALUE);
        assertThat(envoy.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("quiet").addDescriptors(none).build())
                .getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        // a domain no file names still has no limits at all
        assertThat(envoy.shouldRateLimit(call.toBuilder().setDomain("nowhere").build()).getOverallCode()).isEqualTo(Code.OK);
        assertThat(envoy.shouldRateLimit(call.toBuilder().setDomain("nowhere").build()).getOverallCode()).isEqualTo(Code.OK);
    }

    @Test
    void anEditedFileIsReloadedABadEditKeepsTheLastGoodOneAndANewFileInTheDirectoryIsRead() throws Exception {
        startOnEdge();
        Path edge = dir.resolve("ratelimit/edge.yaml");
        Files.writeString(edge, EDGE.replace("requests_per_unit: 3", "requests_per_unit: 30"));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(ask(descriptor("remote_address", "10.0.0.7")).getStatuses(0).getCurrentLimit().getRequestsPerUnit())
                .isEqualTo(30);

        Files.writeString(edge, EDGE.replace("unit: minute", "unit: fortnight"));
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.reload()).as("a bad edit is told once").isEqualTo(LiveConfig.Reload.UNCHANGED);
        assertThat(ask(descriptor("remote_address", "10.0.0.7")).getStatuses(0).getCurrentLimit().getRequestsPerUnit())
                .isEqualTo(30);
        assertThat(live.metrics().scrape()).contains("sluice_config_reloads_total{result=\"failure\"} 1.0");

        Files.writeString(edge, EDGE);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        Files.writeString(dir.resolve("ratelimit/core.yml"), """
                domain: core
                descriptors:
                  - key: service
                    rate_limit: {unit: second, requests_per_unit: 7}
                """);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.policies().policy("core.service")).isNotNull();
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
    }

    @Test
    void aFileNamedButMissingIsReadOnceItComes() throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), EDGE);
        start("envoy_configs: [edge.yaml]\n");
        Files.writeString(dir.resolve("sluice.yaml"), "envoy_configs: [edge.yaml, later.yaml]\n");
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.REFUSED);
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.UNCHANGED);
        Files.writeString(dir.resolve("later.yaml"), "domain: later\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 1}}]\n");
        assertThat(live.reload()).isEqualTo(LiveConfig.Reload.APPLIED);
        assertThat(live.policies().policy("later.k")).isNotNull();
    }

    @Test
    void theExampleFileIsReadAsDocsEnvoyMdSays() throws Exception {
        Path example = Path.of(System.getProperty("user.dir")).getParent().resolve("examples/envoy");
        start("envoy_configs: [" + example + "]\n");
        assertThat(live.policies().config().policies()).extracting(PolicyConfig::name).containsExactly(
                "edge.remote_address", "checkout-per-user", "edge.plan_premium_", "edge.plan");
        assertThat(ask(descriptor("generic_key", "checkout", "user", "ann")).getStatuses(0).getLimitRemaining())
                .isEqualTo(19);
        assertThat(ask(descriptor("remote_address", "10.0.0.1")).getStatuses(0).hasCurrentLimit()).isFalse();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', textBlock = """
            an unknown field|domain: edge\\ndescriptors:\\n  - key: a\\n    limit: 3|edge.yaml:4: descriptors[0].limit: unknown field "limit"; expected one of [descriptors, detailed_metric, key, rate_limit, shadow_mode, share_threshold, value, value_to_metric]
            a bad unit|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit:\\n      unit: fortnight\\n      requests_per_unit: 1|edge.yaml:5: descriptors[0].rate_limit.unit: expected one of second, minute, hour, day, week, month, year, got "fortnight"
            no unit|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit:\\n      requests_per_unit: 1|edge.yaml:5: descriptors[0].rate_limit.unit: missing
            a unit beside unlimited|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unlimited: true, unit: second}|edge.yaml:4: descriptors[0].rate_limit.unit: an unlimited rate limit has no unit
            a number with a leading 0|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unit: second, requests_per_unit: 010}|edge.yaml:4: descriptors[0].rate_limit.requests_per_unit: "010" starts with a 0, which YAML 1.1 reads as octal: write it without the 0
            a limit beyond uint32|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unit: second, requests_per_unit: 4294967296}|edge.yaml:4: descriptors[0].rate_limit.requests_per_unit: more than Envoy's uint32 holds: 4294967296
            an empty key|domain: edge\\ndescriptors:\\n  - key: ''|edge.yaml:3: descriptors[0].key: must not be empty
            a key with a space|domain: edge\\ndescriptors:\\n  - key: a b|edge.yaml:3: descriptors[0].key: Sluice takes keys without white space or '=', got "a b"
            the same node twice|domain: edge\\ndescriptors:\\n  - key: a\\n    value: x\\n  - key: a\\n    value: x|edge.yaml:5: descriptors[1]: a second a=x on this level (the first at line 3)
            one key twice on a path|domain: edge\\ndescriptors:\\n  - key: a\\n    descriptors:\\n      - key: a|edge.yaml:5: descriptors[0].descriptors[0].key: key "a" is on the path above already; Sluice counts a descriptor by the values of its keys, so each key once
            no domain|descriptors: []|edge.yaml:1: domain: missing; an Envoy rate limit configuration names its domain
            a rate limit replacing itself|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unit: hour, requests_per_unit: 1, name: x, replaces: [{name: x}]}|edge.yaml:4: descriptors[0].rate_limit.replaces[0].name: a rate limit cannot replace itself
            a name Sluice cannot take|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unit: hour, requests_per_unit: 1, name: my limit}|edge.yaml:4: descriptors[0].rate_limit.name: a Sluice policy name is letters, digits, '.', '_' or '-', got "my limit"
            shadow_mode not a flag|domain: edge\\ndescriptors:\\n  - key: a\\n    shadow_mode: yes please|edge.yaml:4: descriptors[0].shadow_mode: expected true or false, got "yes please"
            share_threshold without a wildcard|domain: edge\\ndescriptors:\\n  - key: a\\n    share_threshold: true|edge.yaml:4: descriptors[0].share_threshold: share_threshold is for a value that ends in *, whose values then share one counter
            """)
    void aBadEnvoyFileIsRefusedNamingItsOwnLineAndField(String what, String envoyFile, String message) throws Exception {
        Files.writeString(dir.resolve("edge.yaml"), envoyFile.replace("\\n", "\n"));
        Path sluice = dir.resolve("sluice.yaml");
        Files.writeString(sluice, "envoy_configs: [edge.yaml]\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).as(what).isInstanceOf(ConfigException.class)
                .hasMessage(dir.resolve(message.substring(0, message.indexOf(':'))) + message.substring(message.indexOf(':')));
    }

    @Test
    void aYearOnTheRedisStoreIsRefusedWhereTheEnvoyFileSaysIt() throws Exception {
        // Lua's numbers keep a window exact under 2^53 ns (104.2 days): loaded, a year would fail every decision on Redis
        Files.writeString(dir.resolve("edge.yaml"), "domain: edge\ndescriptors:\n  - key: a\n"
                + "    rate_limit: {unit: month, requests_per_unit: 5}\n  - key: b\n    rate_limit:\n      unit: year\n"
                + "      requests_per_unit: 10\n");
        Path sluice = dir.resolve("sluice.yaml");
        Files.writeString(sluice, "store: redis://localhost:6379\nenvoy_configs: [edge.yaml]\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).isInstanceOf(ConfigException.class)
                .hasMessage(dir.resolve("edge.yaml") + ":7: descriptors[1].rate_limit.unit: limit 10/365d is beyond the"
                        + " Redis store: its period is 2^53 ns (104.2 days) or longer (Lua's numbers are exact only up to 2^53)");
        Files.writeString(sluice, "envoy_configs: [edge.yaml]\n");
        assertThat(ConfigLoader.load(sluice).policies()).extracting(PolicyConfig::name).containsExactly("edge.a", "edge.b");
    }

    /** Envoy's MERGE_DOMAIN_CONFIG: the files of one domain make one tree, whose top level no two nodes share. */
    @Test
    void filesOfOneDomainAreMergedWhenAskedAndDecideTogether() throws Exception {
        Files.createDirectories(dir.resolve("ratelimit"));
        Files.writeString(dir.resolve("ratelimit/one.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 1}\n");
        Files.writeString(dir.resolve("ratelimit/two.yaml"), "domain: edge\ndescriptors:\n  - key: user\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 2}\n");
        start("envoy_configs: [ratelimit]\nenvoy_merge_domains: true\n");
        assertThat(live.policies().config().policies()).extracting(PolicyConfig::name, PolicyConfig::counterSignature)
                .containsExactly(tuple("edge.remote_address", "fixed-window 1/1h"), tuple("edge.user", "fixed-window 2/1h"));
        // one call, a descriptor of each file: each decided by its own file's limit
        RateLimitResponse first = ask(descriptor("remote_address", "10.0.0.7"), descriptor("user", "alice"));
        assertThat(first.getOverallCode()).isEqualTo(Code.OK);
        assertThat(first.getStatuses(0).getLimitRemaining()).isZero();
        assertThat(first.getStatuses(1).getLimitRemaining()).isEqualTo(1);
        assertThat(ask(descriptor("remote_address", "10.0.0.7")).getOverallCode()).isEqualTo(Code.OVER_LIMIT);
        assertThat(ask(descriptor("user", "alice")).getStatuses(0).getLimitRemaining()).isZero();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '\'', value = {
            "the same node in two files|domain: edge\\ndescriptors:\\n  - key: a\\n    rate_limit: {unit: hour, requests_per_unit: 1}|two.yaml:3: descriptors[0]: a second a on this level (the first at one.yaml:3)",
            "a flag that is not true or false|domain: other\\ndescriptors: []|sluice.yaml:2: envoy_merge_domains: expected true or false, got \"yes\"",
    })
    void mergedFilesAreRefusedWhereEnvoysServiceRefusesThem(String problem, String two, String message) throws Exception {
        Files.writeString(dir.resolve("one.yaml"), "domain: edge\ndescriptors:\n  - key: a\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 1}\n");
        Files.writeString(dir.resolve("two.yaml"), two.replace("\\n", "\n"));
        Path sluice = dir.resolve("sluice.yaml");
        Files.writeString(sluice, "envoy_configs: [one.yaml, two.yaml]\nenvoy_merge_domains: "
                + (problem.startsWith("a flag") ? "yes" : "true") + "\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(message.replace("two.yaml", dir.resolve("two.yaml")
                .toString()).replace("one.yaml:", dir.resolve("one.yaml") + ":").replace("sluice.yaml", sluice.toString()));
    }

    @Test
    void mergingNeedsFilesToMerge() {
        assertThatThrownBy(() -> ConfigLoader.parse("sluice.yaml", "envoy_merge_domains: true\npolicies:\n  - name: p\n"
                + "    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n")).hasMessage("sluice.yaml:1: envoy_merge_domains:"
                + " it is for the files of envoy_configs, and there are none");
    }

    @Test
    void pathsAndNamesThatCannotBeAreRefusedWhereSluiceYamlNamesThem() throws Exception {
        Path sluice = dir.resolve("sluice.yaml");
        Files.writeString(sluice, "envoy_configs:\n  - nowhere.yaml\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(sluice + ":2: envoy_configs[0]: no such file or"
                + " directory: " + dir.resolve("nowhere.yaml"));

        // an empty path named the directory of sluice.yaml, and a NUL came out as a stack trace (a review found both)
        Files.writeString(sluice, "envoy_configs: [\"\"]\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(sluice + ":1: envoy_configs[0]: \"\" is not a"
                + " path: empty; name a file or directory");
        Files.writeString(sluice, "envoy_configs: [\"a\\0b\"]\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(sluice + ":1: envoy_configs[0]: \"a\\0b\" is"
                + " not a path: Nul character not allowed");

        // a directory that holds no file, and files of unlimited descriptors only, give no limit, as in Envoy's
        // service; refused, a reload that set every limit unlimited kept the old ones in force (a review)
        Files.createDirectories(dir.resolve("empty"));
        Files.writeString(sluice, "envoy_configs: [empty]\n");
        assertThat(ConfigLoader.load(sluice).policies()).isEmpty();
        Files.writeString(dir.resolve("free.yaml"), "domain: free\ndescriptors:\n  - key: remote_address\n"
                + "    rate_limit: {unlimited: true}\n");
        Files.writeString(sluice, "envoy_configs: [free.yaml]\n");
        assertThat(ConfigLoader.load(sluice).policies()).isEmpty();
        Files.delete(dir.resolve("free.yaml"));

        Files.writeString(dir.resolve("one.yaml"), "domain: edge\ndescriptors: [{key: a, rate_limit: {unit: hour, requests_per_unit: 1}}]\n");
        Files.writeString(dir.resolve("two.yaml"), "\ndomain: edge\ndescriptors: []\n");
        Files.writeString(sluice, "envoy_configs: [one.yaml, two.yaml]\n");
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(dir.resolve("two.yaml") + ":2: domain: domain"
                + " \"edge\" is configured already, at " + dir.resolve("one.yaml") + ":1 (envoy_merge_domains: true merges"
                + " the files of one domain, as Envoy's MERGE_DOMAIN_CONFIG does)");

        // a name made from a path that is taken takes a suffix; a name given that is taken is refused
        Files.writeString(dir.resolve("dots.yaml"), "domain: edge\ndescriptors:\n  - key: b\n    descriptors:\n"
                + "      - key: c\n        rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: b.c\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 1}\n");
        String withPolicy = """
                policies:
                  - name: edge.a
                    key: [ip]
                    algorithm: gcra
                    limits: [1/1s]
                envoy_configs: [%s]
                """;
        Files.writeString(sluice, withPolicy.formatted("one.yaml, dots.yaml"));
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessageContaining("domain \"edge\" is configured already");
        Files.writeString(dir.resolve("dots.yaml"), Files.readString(dir.resolve("dots.yaml")).replace("edge", "dots"));
        List<String> made = ConfigLoader.load(sluice).policies().stream().map(PolicyConfig::name).toList();
        assertThat(made).hasSize(4).startsWith("edge.a");
        assertThat(made.get(1)).matches("edge\\.a-[0-9a-f]{6}");
        // two limits that make one name both take a suffix of their own, not only the second read (a review)
        assertThat(made.get(2)).matches("dots\\.b\\.c-[0-9a-f]{6}");
        assertThat(made.get(3)).matches("dots\\.b\\.c-[0-9a-f]{6}").isNotEqualTo(made.get(2));
        // the suffix is the limit's own, not a count in file order: an edit elsewhere hands no name to another limit
        Files.writeString(sluice, withPolicy.formatted("one.yaml, dots.yaml").replace("edge.a", "other"));
        assertThat(ConfigLoader.load(sluice).policies()).extracting(PolicyConfig::name).contains("edge.a");
        Files.writeString(sluice, withPolicy.formatted("one.yaml, dots.yaml"));
        assertThat(ConfigLoader.load(sluice).policies()).extracting(PolicyConfig::name).containsExactlyElementsOf(made);
        Files.writeString(dir.resolve("named.yaml"), "domain: edge\ndescriptors:\n  - key: a\n"
                + "    rate_limit: {unit: hour, requests_per_unit: 1, name: edge.a}\n");
        Files.writeString(sluice, withPolicy.formatted("named.yaml"));
        assertThatThrownBy(() -> ConfigLoader.load(sluice)).hasMessage(dir.resolve("named.yaml") + ":4: descriptors[0]"
                + ".rate_limit.name: \"edge.a\" is the name of the policy at " + sluice + ":2 already");

    }
}
