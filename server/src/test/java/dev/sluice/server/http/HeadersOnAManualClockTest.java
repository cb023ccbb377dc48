package dev.sluice.server.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.DurationFormat;
import dev.sluice.ManualClock;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.store.InMemoryStore;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The gateway's rate limit headers to the second, on a store whose clock the test moves: the other HTTP tests run on
 * the machine's clock and can check a reset only within bounds (a review found {@code t=} checked by its prefix alone).
 */
class HeadersOnAManualClockTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    /** 10:00 on 2017-03-30, a whole number of hours since the epoch: every window here starts on it. */
    private static final long TEN_O_CLOCK = 1_490_868_000_000_000_000L;
    private static final long MS = 1_000_000L;
    private static final String POLICIES = """
            headers: [ietf, legacy]
            policies:
              - name: api
                match: {path: /api/**}
                key: [header:X-User]
                algorithm: fixed-window
                limits: [5/10s]
              - name: stack
                match: {path: /stack}
                key: [header:X-User]
                algorithm: fixed-window
                limits: [3/10s, 5/1h]
              - name: valve
                match: {path: /valve}
                key: [header:X-User]
                algorithm: gcra
                limits: [1/1s]
                mode: delay
                max_delay: 5s
              - name: queue
                match: {path: /queue}
                key: [header:X-User]
                algorithm: leaky-bucket
                limits: [4/1s burst=4]
                mode: shaping
                max_delay: 600ms
              - name: paced
                match: {path: /paced}
                key: [header:X-User]
                algorithm: gcra
                limits: [10/1m]
              - name: quick
                match: {path: /quick}
                key: [header:X-User]
                algorithm: fixed-window
                limits: [5/500ms, 20/1500ms, 100/1h]
              - name: slow-upstream
                match: {path: /hold}
                key: [header:X-User]
                algorithm: fixed-window
                limits: [5/10s]
              - name: costly
                match: {path: /costly}
                key: [header:X-User]
                algorithm: fixed-window
                limits: [10/10s]
                cost: header:X-Cost
            """;

    private final ManualClock clock = new ManualClock(TEN_O_CLOCK + 3_200 * MS);
    private Upstream upstream;
    private LiveConfig live;
    private Gateway gateway;

    @BeforeEach
    void start() throws Exception {
        upstream = new Upstream();
        live = LiveConfig.of(ConfigLoader.parse("gateway.yaml", POLICIES), InMemoryStore.builder().clock(clock).build(),
                new ServerMetrics());
        gateway = Gateway.start(live, URI.create(upstream.uri()), "127.0.0.1", 0);
    }

    @AfterEach
    void stop() throws Exception {
        gateway.close();
        live.close();
        upstream.close();
    }

    @Test
    void aWindowsHeadersCountDownToItsEndAndA429SaysWhenToComeBack() throws Exception {
        for (int remaining = 4; remaining >= 0; remaining--) {
            // 6.8 s left of the window: 7 whole seconds, rounded up
            assertThat(rateLimitHeaders(get("/api/items", "alice"))).isEqualTo(Map.of(
                    "status", "200", "RateLimit-Policy", "\"api\";q=5;w=10", "RateLimit", "\"api\";r=" + remaining + ";t=7",
                    "X-RateLimit-Limit", "5", "X-RateLimit-Remaining", Integer.toString(remaining),
                    "X-RateLimit-Reset", "7"));
        }
        HttpResponse<String> rejected = get("/api/items", "alice");
        assertThat(rateLimitHeaders(rejected)).isEqualTo(Map.of("status", "429", "Retry-After", "7",
                "RateLimit-Policy", "\"api\";q=5;w=10", "RateLimit", "\"api\";r=0;t=7", "X-RateLimit-Limit", "5",
                "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"));
        assertThat(JSON.readTree(rejected.body()).get("retry_after_ms").asLong()).isEqualTo(6_800);

        clock.set(TEN_O_CLOCK + 10_000 * MS - 1); // a nanosecond before the window ends: 1 second, rounded up
        assertThat(rateLimitHeaders(get("/api/items", "alice"))).containsEntry("status", "429")
                .containsEntry("Retry-After", "1").containsEntry("RateLimit", "\"api\";r=0;t=1");
        clock.set(TEN_O_CLOCK + 10_000 * MS);
        assertThat(rateLimitHeaders(get("/api/items", "alice"))).containsEntry("status", "200")
                .containsEntry("RateLimit", "\"api\";r=4;t=10").containsEntry("X-RateLimit-Reset", "10");
        assertThat(upstream.requests.get()).isEqualTo(6);
    }

    /**
     * Both sets report the limit closest to rejecting, with that limit's own reset: first the 10 s one, then the hour.
     * Every item is named by its policy, as spec/server.md writes them; X-RateLimit-Limit tells which limit it is.
     */
    @Test
    void stackedLimitsReportTheOneClosestToRejectingWithItsOwnReset() throws Exception {
        String policy = "\"stack\";q=3;w=10, \"stack\";q=5;w=3600";
        for (int remaining = 2; remaining >= 0; remaining--) {
            assertThat(rateLimitHeaders(get("/stack", "bob"))).isEqualTo(Map.of("status", "200",
                    "RateLimit-Policy", policy, "RateLimit", "\"stack\";r=" + remaining + ";t=7",
                    "X-RateLimit-Limit", "3", "X-RateLimit-Remaining", Integer.toString(remaining),
                    "X-RateLimit-Reset", "7"));
        }
        clock.set(TEN_O_CLOCK + 10_000 * MS); // the 10 s window is new (3 left, then 2); the hour has 2 left, then 1
        assertThat(rateLimitHeaders(get("/stack", "bob"))).isEqualTo(Map.of("status", "200", "RateLimit-Policy", policy,
                "RateLimit", "\"stack\";r=1;t=3590", "X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "1",
                "X-RateLimit-Reset", "3590"));
        assertThat(rateLimitHeaders(get("/stack", "bob"))).containsEntry("RateLimit", "\"stack\";r=0;t=3590");
        assertThat(rateLimitHeaders(get("/stack", "bob"))).isEqualTo(Map.of("status", "429", "Retry-After", "3590",
                "RateLimit-Policy", policy, "RateLimit", "\"stack\";r=0;t=3590", "X-RateLimit-Limit", "5",
                "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3590"));
    }

    /**
     * A rejection's {@code t} is no later than its {@code Retry-After}: the draft's t is when more quota comes, and a
     * Retry-After no sooner than it. A review found a gcra of 10 a minute answering its eleventh request at one
     * instant {@code Retry-After: 6} beside {@code t=60}, the time until all ten are back. The legacy reset stays that.
     */
    @Test
    void aRejectionsResetIsNoLaterThanItsRetryAfter() throws Exception {
        for (int remaining = 9; remaining >= 0; remaining--) {
            assertThat(rateLimitHeaders(get("/paced", "erin"))).containsEntry("status", "200")
                    .containsEntry("RateLimit", "\"paced\";r=" + remaining + ";t=" + (60 - 6 * remaining));
        }
        assertThat(rateLimitHeaders(get("/paced", "erin"))).isEqualTo(Map.of("status", "429", "Retry-After", "6",
                "RateLimit-Policy", "\"paced\";q=10;w=60", "RateLimit", "\"paced\";r=0;t=6", "X-RateLimit-Limit", "10",
                "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"));
    }

    /**
     * A window of less than a second has no {@code w} (whole seconds, in the draft), but Sluice's own parameter: a
     * review found 5/500ms told as {@code w=1}, half its rate.
     */
    @Test
    void aWindowOfLessThanASecondIsToldInMilliseconds() throws Exception {
        assertThat(rateLimitHeaders(get("/quick", "fay"))).containsEntry("RateLimit-Policy",
                "\"quick\";q=5;sluice-w-ms=500, \"quick\";q=20;sluice-w-ms=1500, \"quick\";q=100;w=3600")
                .containsEntry("RateLimit", "\"quick\";r=4;t=1").containsEntry("X-RateLimit-Limit", "5");
    }

    /**
     * A cost above the capacity can never be admitted: the 429 says the capacity and nothing that would send the
     * client back (a review found {@code r=10;t=0} and {@code X-RateLimit-Reset: 0} on a fresh key, and no
     * Retry-After: a client retried at once, for ever).
     */
    @Test
    void aCostThatCanNeverFitTellsTheCapacityAndNoWait() throws Exception {
        HttpResponse<String> never = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port()
                + "/costly")).header("X-User", "gus").header("X-Cost", "11").build(), HttpResponse.BodyHandlers.ofString());
        assertThat(rateLimitHeaders(never)).isEqualTo(Map.of("status", "429", "RateLimit-Policy",
                "\"costly\";q=10;w=10", "X-RateLimit-Limit", "10"));
        assertThat(JSON.readTree(never.body()).get("retry_after_ms").asLong()).isEqualTo(-1);
        HttpResponse<String> fits = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port()
                + "/costly")).header("X-User", "gus").header("X-Cost", "10").build(), HttpResponse.BodyHandlers.ofString());
        assertThat(rateLimitHeaders(fits)).containsEntry("status", "200").containsEntry("RateLimit", "\"costly\";r=0;t=7");
    }

    /**
     * A request held for its turn is answered that much later, and its reset counts from then: held 1 s of a limit
     * untouched again 2 s after the decision, it says 1 (a review found a reset already past when it was read).
     */
    @Test
    void aHeldRequestsResetCountsFromWhenItGoesOn() throws Exception {
        assertThat(rateLimitHeaders(get("/valve", "carol"))).containsEntry("RateLimit", "\"valve\";r=0;t=1");
        long sent = System.nanoTime();
        HttpResponse<String> held = get("/valve", "carol");
        assertThat(System.nanoTime() - sent).as("held for its turn").isGreaterThanOrEqualTo(1_000 * MS);
        assertThat(rateLimitHeaders(held)).isEqualTo(Map.of("status", "200", "RateLimit-Policy", "\"valve\";q=1;w=1",
                "RateLimit", "\"valve\";r=0;t=1", "X-RateLimit-Limit", "1", "X-RateLimit-Remaining", "0",
                "X-RateLimit-Reset", "1"));
    }

    /**
     * The reset counts from when the answer leaves, not from the decision: an upstream that takes 1.5 s answers a
     * window with 6.8 s left as t=6, not 7 (a review found it late by the upstream's time). The store's clock stands
     * still here; the time the answer took is the machine's.
     */
    @Test
    void theResetCountsFromTheUpstreamsAnswer() throws Exception {
        long sent = System.nanoTime();
        HttpResponse<String> slow = get("/hold?ms=1500", "hal");
        long took = System.nanoTime() - sent;
        assertThat(slow.statusCode()).isEqualTo(200);
        // 6.8 s left less the time the answer took: at least the upstream's 1.5 s, at most the whole round trip
        long t = Long.parseLong(slow.headers().firstValue("X-RateLimit-Reset").orElseThrow());
        assertThat(t).as("6.8 s less 1.5 s or more, rounded up (7 counted from the decision)")
                .isBetween(DurationFormat.toSecondsCeil(Math.max(0, 6_800 * MS - took)), 6L);
        assertThat(slow.headers().firstValue("RateLimit")).hasValue("\"slow-upstream\";r=4;t=" + t);
    }

    /**
     * A queue with a max delay lets in only a request whose turn comes within it: turns of 0, 250 and 500 ms are held
     * and forwarded, one of 750 ms is answered 429 at once, to come back once 150 ms have drained.
     */
    @Test
    void aQueueWithAMaxDelayRejectsATurnFurtherOff() throws Exception {
        long sent = System.nanoTime();
        for (int i = 0; i < 3; i++) {
            assertThat(get("/queue", "dave").statusCode()).isEqualTo(200);
        }
        assertThat(System.nanoTime() - sent).as("held 0, 250 and 500 ms").isGreaterThanOrEqualTo(750 * MS);
        HttpResponse<String> rejected = get("/queue", "dave");
        assertThat(rateLimitHeaders(rejected)).containsEntry("status", "429").containsEntry("Retry-After", "1");
        assertThat(JSON.readTree(rejected.body()).get("retry_after_ms").asLong()).isEqualTo(150);
        clock.set(clock.nanos() + 150 * MS);
        assertThat(get("/queue", "dave").statusCode()).as("its turn is now 600 ms off").isEqualTo(200);
        assertThat(upstream.requests.get()).isEqualTo(4);
    }

    private HttpResponse<String> get(String path, String user) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + path))
                .header("X-User", user).timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** The status and every rate limit header of {@code response}, each once. */
    private static Map<String, String> rateLimitHeaders(HttpResponse<?> response) {
        Map<String, String> headers = new TreeMap<>();
        headers.put("status", Integer.toString(response.statusCode()));
        for (String name : List.of("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining",
                "X-RateLimit-Reset", "Retry-After")) {
            List<String> values = response.headers().allValues(name);
            assertThat(values).as(name).hasSizeLessThanOrEqualTo(1);
            values.forEach(value -> headers.put(name, value));
        }
        return headers;
    }
}
