package dev.sluice.server;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.Mode;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.request.Descriptor;
import dev.sluice.server.request.KeyPart;
import dev.sluice.server.request.PathGlob;
import dev.sluice.store.FailurePolicy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConfigLoaderTest {
    private static final Path EXAMPLE = Path.of(System.getProperty("user.dir")).getParent().resolve("examples/sluice.yaml");

    @Test
    void theExampleShowsEveryKindOfPolicy() throws ConfigException {
        ServerConfig config = ConfigLoader.load(EXAMPLE);
        assertThat(config.store()).isEqualTo("memory");
        assertThat(config.onStoreFailure()).isEqualTo(FailurePolicy.OPEN);
        assertThat(config.storeTimeoutNanos()).isEqualTo(50_000_000L);
        assertThat(config.trustedProxies()).containsExactly("127.0.0.1/32");
        assertThat(config.headers()).containsExactlyInAnyOrder(ServerConfig.HeaderSet.IETF, ServerConfig.HeaderSet.LEGACY);
        assertThat(config.policies()).extracting(PolicyConfig::name).containsExactly("api-per-key", "login-per-ip",
                "search-budget", "export-throttle", "webhooks", "reports-in-flight", "envoy-per-address",
                "envoy-trusted-address", "trial-per-host");
        assertThat(config.policy("reports-in-flight").inFlight()).isEqualTo(Limit.parse("4/5m"));
        assertThat(config.policy("reports-in-flight").algorithm()).isEqualTo("concurrency");
        PolicyConfig api = config.policy("api-per-key");
        assertThat(api.match()).isEqualTo(new PolicyConfig.Match(PathGlob.compile("/api/**"), List.of("GET", "POST"), null));
        assertThat(api.key()).containsExactly(new KeyPart.Header("X-API-Key"), new KeyPart.Route());
        assertThat(api.rule().limits()).containsExactly(Limit.parse("600/1m"), Limit.parse("3600/1h"));
        assertThat(config.policy("search-budget").costHeader()).isEqualTo("X-Cost");
        assertThat(config.policy("search-budget").rule().limits().get(0)).isEqualTo(Limit.parse("100/1m refill=interval"));
        assertThat(config.policy("export-throttle").rule().mode()).isEqualTo(Mode.DELAY);
        assertThat(config.policy("export-throttle").rule().maxDelayNanos()).isEqualTo(2_000_000_000L);
        assertThat(config.policy("webhooks").rule().mode()).isEqualTo(Mode.SHAPING);
        assertThat(config.policy("envoy-trusted-address").match()).isEqualTo(new PolicyConfig.Match(null, null, null,
                "edge", List.of(new Descriptor.Entry("remote_address", "10.0.0.1"))));
        assertThat(config.policy("envoy-per-address").key()).containsExactly(new KeyPart.DescriptorValue("remote_address"));
        assertThat(config.policy("trial-per-host").shadow()).isTrue();
        assertThat(config.policy("trial-per-host").rule().algorithm()).isEqualTo(Algorithm.SLIDING_LOG);
    }

    private static final String GOOD = "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n    limits: [10/1s]\n";

    /**
     * check, /v1/policies and simulate call leaky-bucket's queue shaping, and a review found the name refused in the
     * file: it is taken as the same mode as delay.
     */
    @Test
    void shapingIsLeakyBucketsDelayUnderTheNameCheckGivesIt() throws Exception {
        String policy = "policies:\n  - name: p\n    key: [ip]\n    algorithm: leaky-bucket\n    limits: [5/1s]\n    mode: ";
        assertThat(ConfigLoader.parse("t.yaml", policy + "shaping").policies().get(0).rule().toString())
                .isEqualTo(ConfigLoader.parse("t.yaml", policy + "delay").policies().get(0).rule().toString())
                .isEqualTo("leaky-bucket [5/1s] shaping");
        assertThat(ConfigLoader.parse("t.yaml", policy + "shaping").policies().get(0).rule().mode())
                .isEqualTo(dev.sluice.Mode.SHAPING);
        // a queue that lets in only a request whose turn comes within max_delay: the rest are rejected at once
        dev.sluice.algorithm.Rule capped = ConfigLoader.parse("t.yaml", policy + "shaping\n    max_delay: 2s")
                .policies().get(0).rule();
        assertThat(capped.toString()).isEqualTo("leaky-bucket [5/1s] shaping max_delay=2s");
        assertThat(capped.maxDelayNanos()).isEqualTo(2_000_000_000L);
        // 0: a queue that lets a request in only when no turn is ahead, as simulate's --max-delay 0s
        assertThat(ConfigLoader.parse("t.yaml", policy + "shaping\n    max_delay: 0s").policies().get(0).rule()
                .maxDelayNanos()).isZero();
    }

    /**
     * What a path decoded from %3F, %23, %5C or %25 holds, a pattern may hold, and a host may be written past ASCII
     * (/v1/check-request matches it as described): a second review found them refused, which refused files that had
     * worked.
     */
    @Test
    void patternsThatADecodedPathOrADescribedHostMatchAreTaken() throws Exception {
        for (String glob : List.of("/what?", "/files/100%", "/tag/c#", "/a\\\\b", "/", "/api/", "/api/**/")) {
            assertThat(ConfigLoader.parse("t.yaml", "policies:\n  - name: p\n    match: {path: '" + glob + "'}\n"
                    + "    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n").policies()).as(glob).hasSize(1);
        }
        assertThat(ConfigLoader.parse("t.yaml", "policies:\n  - name: p\n    match: {host: bücher.de}\n"
                + "    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n").policies().get(0).match().host())
                .isEqualTo("bücher.de");
    }

    /** A review found a value's control characters printed as they were: an escape sequence, a NUL, a line break. */
    @Test
    void aMessageShowsTheControlCharactersOfAValueEscaped() {
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "policies:\n  - name: \"a\\e[31mRED\\nB\\0\"\n"
                + "    key: [ip]\n    algorithm: gcra\n    limits: [1/1s]\n    mode: \"x\\ry\"\n"))
                .hasMessage("t.yaml:2: policies[0].name: expected letters, digits, '.', '_' or '-', got"
                        + " \"a\\x1b[31mRED\\x0aB\\x00\"");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "an unknown top field|storage: memory\\n" + "policies: []|t.yaml:1: storage: unknown field \"storage\"; expected one of [dashboard_keys, envoy_configs, envoy_headers, envoy_merge_domains, headers, max_keys, on_store_failure, policies, reject_body, reject_status, store, store_connect, store_password_env, store_password_file, store_timeout, store_trust, trusted_proxies]",
            "a store connected otherwise|store: redis://127.0.0.1:6379\\nstore_connect: later\\npolicies: []|t.yaml:2: store_connect: expected now or background, got \"later\"",
            "a failure policy misspelt|on_store_failure: opne\\npolicies: []|t.yaml:1: on_store_failure: expected open or closed, got \"opne\"",
            "a three-way choice listed|store: memory\\npolicies:\\n  - {name: p, key: [ip], algorithm: gcra, limits: [1/1s], mode: wait}|t.yaml:3: policies[0].mode: expected reject, delay or shadow (or shaping, leaky-bucket's delay), got \"wait\"",
            "memory connected in the background|store_connect: background\\npolicies: []|t.yaml:1: store_connect: the in-memory store has nothing to connect to",
            "a Cluster connected in the background|store: redis-cluster://127.0.0.1:7000\\nstore_connect: background\\npolicies: []|t.yaml:2: store_connect: background is for a single Redis or Sentinel: a Cluster store learns its slots from a node as it is made, got redis-cluster://127.0.0.1:7000",
            "dashboard keys neither masked nor shown|dashboard_keys: hidden\\npolicies: []|t.yaml:1: dashboard_keys: expected masked (the default: a key's headers, cookies, query parameters, users and descriptor values masked) or shown, got \"hidden\"",
            "no keys|max_keys: 0\\npolicies: []|t.yaml:1: max_keys: expected a whole number >= 1, got \"0\"",
            "keys past the heap|max_keys: 100000001\\npolicies: []|t.yaml:1: max_keys: at most 100000000 (about 100 bytes of heap a key), got 100000001",
            "a store timeout past a day|store_timeout: 2d\\npolicies: []|t.yaml:1: store_timeout: at most 1d (a decision waits that long at most), got \"2d\"",
            "a store timeout no Redis meets|store_timeout: 1ns\\npolicies: []|t.yaml:1: store_timeout: at least 1ms (below it Redis's answers would come too late, and every decision would be the failure policy's), got \"1ns\"",
            "a host of YAML's null|policies:\\n  - name: p\\n    match:\\n      host: ~\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: \"~\" is YAML's null: leave the field out, or give it a value",
            "a name of YAML's null|policies:\\n  - name: null\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:2: policies[0].name: \"null\" is YAML's null: leave the field out, or give it a value",
            "keys of Redis|store: redis://localhost:6379\\nmax_keys: 10\\npolicies: []|t.yaml:2: max_keys: bounds the in-memory store only; Redis keeps keys until their TTL, bounded by its own maxmemory",
            "a policy's keys of Redis|store: redis://localhost:6379\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    max_keys: 10|t.yaml:7: policies[0].max_keys: bounds the in-memory store only; Redis keeps keys until their TTL, bounded by its own maxmemory",
            "a policy of no keys|policies:\\n  - name: p\\n    key: [ip]\\n    max_keys: 0\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].max_keys: expected a whole number >= 1, got \"0\"",
            "a policy's keys past the heap|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    max_keys: 100000001|t.yaml:6: policies[0].max_keys: at most 100000000 (about 100 bytes of heap a key), got 100000001",
            "a policy's own store named as the shared one|policies:\\n  - name: shared\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    max_keys: 10|t.yaml:6: policies[0].max_keys: a policy named shared cannot have a store of its own: sluice_store_keys{pool=\"shared\"} is the store the policies share; rename the policy",
            "stores past the heap together|max_keys: 60000000\\npolicies:\\n  - name: a\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    max_keys: 30000000\\n  - name: b\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    max_keys: 20000000|t.yaml:12: policies[1].max_keys: the stores together hold at most 100000000 keys (about 100 bytes of heap a key), and max_keys 60000000 and the policies' own so far come to 110000000",
            "keys of a concurrency policy|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [5/1m]\\n    max_keys: 10|t.yaml:6: policies[0].max_keys: is for rate policies; a concurrency policy holds its own places, at most 100000 leases at once",
            "a bad limit|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [10/1s, 10/0s]|t.yaml:5: policies[0].limits[1]: bad limit \"10/0s\": period must be > 0, got \"0s\"",
            "an unknown policy field|policies:\\n  - name: p\\n    keys: [ip]|t.yaml:3: policies[0].keys: unknown field \"keys\"; expected one of [algorithm, burst, cost, key, limits, match, max_delay, max_keys, mode, name, refill, reject_body, reject_status, replaces, skip_if_missing]",
            "a missing key|policies:\\n  - name: p\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:2: policies[0].key: missing",
            "a bad glob|policies:\\n  - name: p\\n    match:\\n      path: /api/**x\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"/api/**x\": ** must be a whole segment, as in /api/**",
            "a glob escaped|policies:\\n  - name: p\\n    match:\\n      path: /caf%C3%A9\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"/caf%C3%A9\": an escape: paths are matched decoded, so a pattern is written decoded (/café, not /caf%C3%A9)",
            "a glob with a parameter|policies:\\n  - name: p\\n    match:\\n      path: /a;v=1/b\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"/a;v=1/b\": a ;: paths are matched with their parameters cut (/a;v=1/b is /a/b)",
            "a glob with slashes repeated|policies:\\n  - name: p\\n    match:\\n      path: /a//b\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"/a//b\": an empty segment (//): paths are matched with repeated slashes merged",
            "a glob with a dot segment|policies:\\n  - name: p\\n    match:\\n      path: /a/../b\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"/a/../b\": a segment ..: paths are matched with . and .. resolved",
            "a host with a wildcard|policies:\\n  - name: p\\n    match:\\n      host: '*.example.com'\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: \"*.example.com\" is no host a Host header carries (no wildcards, spaces, / @ ? #): one host is matched whole, in any case",
            "a cost past the capacity|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: fixed-window\\n    limits: [10/1m]\\n    cost: 11|t.yaml:6: policies[0].cost: a cost of 11 is more than the policy's limits ever admit at once: every request would be rejected",
            "a cost past the burst|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [10/1m burst=3]\\n    cost: 4|t.yaml:6: policies[0].cost: a cost of 4 is more than the policy's limits ever admit at once: every request would be rejected",
            "a cost past what is in flight|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/1m]\\n    cost: 30|t.yaml:6: policies[0].cost: a cost of 30 is more than the policy's limits ever admit at once: every request would be rejected",
            "a cost of 0, which never limits|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: fixed-window\\n    limits: [1/1m]\\n    cost: 0|t.yaml:6: policies[0].cost: a cost of 0 charges nothing, so the policy would never limit a request: remove it, or use mode: shadow to watch a limit without enforcing it",
            "a cost of 0 on requests in flight|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [1/1m]\\n    cost: 0|t.yaml:6: policies[0].cost: a cost of 0 charges nothing, so the policy would never limit a request: remove it, or use mode: shadow to watch a limit without enforcing it",
            "a huge cost|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: token-bucket\\n    limits: [10/1m]\\n    cost: 9223372036854775807|t.yaml:6: policies[0].cost: a cost of 9223372036854775807 is more than the policy's limits ever admit at once: every request would be rejected",
            "a glob not from the root|policies:\\n  - name: p\\n    match:\\n      path: api/*\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.path: bad glob \"api/*\": a path starts with /",
            "a duplicate name not first|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n  - key: [ip]\\n    algorithm: gcra\\n    name: p\\n    limits: [1/1s]|t.yaml:8: policies[1].name: duplicate policy name \"p\" (first at line 2)",
            "a duplicate name|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:6: policies[1].name: duplicate policy name \"p\" (first at line 2)",
            "an unknown algorithm|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: bucket\\n    limits: [1/1s]|t.yaml:4: policies[0].algorithm: unknown algorithm \"bucket\": expected one of fixed-window, sliding-log, sliding-window, token-bucket, gcra, leaky-bucket, concurrency",
            "a burst where there is none|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: fixed-window\\n    limits: [1/1s]\\n    burst: 5|t.yaml:6: policies[0].burst: burst is for token-bucket, gcra and leaky-bucket, not fixed-window",
            "a refill where there is none|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    refill: interval\\n    limits: [1/1s]|t.yaml:5: policies[0].refill: refill is for token-bucket, not gcra",
            "a window that delays|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: sliding-window\\n    limits: [1/1s]\\n    mode: delay\\n    max_delay: 1s|t.yaml:6: policies[0].mode: delay mode is for token-bucket and gcra (and leaky-bucket, as a queue), not sliding-window",
            "a concurrency policy with two limits|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/30s, 5/1s]|t.yaml:5: policies[0].limits: a concurrency policy has one limit N/LEASE, as in [10/30s]: at most 10 in flight per key, a lease held at most 30 s",
            "a concurrency policy that delays|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/30s]\\n    mode: delay|t.yaml:6: policies[0].mode: a concurrency policy rejects or shadows, got \"delay\"",
            "a concurrency limit no limiter can hold|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [200000/30s]|t.yaml:5: policies[0].limits[0]: a concurrency policy holds at most 100000 places at once over all its keys, got \"200000/30s\"",
            "a concurrency policy with a burst|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/30s]\\n    burst: 3|t.yaml:6: policies[0].burst: burst is for rate limits, not concurrency",
            "concurrency on Redis|store: redis://localhost:6379\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/30s]|t.yaml:5: policies[0].algorithm: concurrency is counted in the memory of each server, so servers sharing redis://localhost:6379 would each count their own; use store: memory",
            "concurrency on Redis of a password|store: redis://:s3cret@localhost:6379\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: concurrency\\n    limits: [10/30s]|t.yaml:5: policies[0].algorithm: concurrency is counted in the memory of each server, so servers sharing redis://:****@localhost:6379 would each count their own; use store: memory",
            "a period beyond the Redis store|store: redis://localhost:6379\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: fixed-window\\n    limits: [10/1m,\\n             1/200d]|t.yaml:7: policies[0].limits[1]: limit 1/200d is beyond the Redis store: its period is 2^53 ns (104.2 days) or longer (Lua's numbers are exact only up to 2^53)",
            "a burst beyond the Redis store|store: redis-cluster://a:1,b:2\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1d]\\n    burst: 100|t.yaml:6: policies[0].limits[0]: limit 1/1d burst=100 is beyond the Redis store: B × P / L is 2^52 ns (52.1 days) or longer (Lua's numbers are exact only up to 2^53)",
            "a max delay beyond the Redis store|store: redis://localhost:6379\\npolicies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    mode: delay\\n    max_delay: 60d|t.yaml:8: policies[0].max_delay: max delay 60d is too long for the Redis store: it must be under 2^52 ns (52.1 days)",
            "a bad Redis address|store: redis://local host:6379\\npolicies: []|t.yaml:1: store: bad Redis address \"local host:6379\" in \"redis://local host:6379\": expected host:port[/db]",
            "several nodes but not a Cluster|store: redis://a:1,b:2\\npolicies: []|t.yaml:1: store: bad Redis address \"redis://a:1,b:2\": a standalone Redis is one host:port; several nodes are a Cluster's, redis-cluster://host:port,host:port",
            "a bad Redis port|store: redis-cluster://a:1,b:70000\\npolicies: []|t.yaml:1: store: bad Redis address \"redis-cluster://a:1,b:70000\": port \"70000\" of b:70000: expected 1 to 65535",
            "a bad node after nodes with passwords|store: redis-cluster://:s3cret@a:1,:s3cret@local host:2\\npolicies: []|t.yaml:1: store: bad Redis address \":****@local host:2\" in \"redis-cluster://:****@a:1,:****@local host:2\": expected host:port,host:port",
            "a comma in a Cluster's password, the part before it not quoted|store: redis-cluster://default:abc,def@h1:7000,h2:7000\\npolicies: []|t.yaml:1: store: bad Redis address \"redis-cluster://default:****@h1:7000,h2:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "an @ and a comma in a Cluster's password, what lies between them no host|store: redis-cluster://:Xy@3!k,9@h1:7000\\npolicies: []|t.yaml:1: store: bad Redis address \"redis-cluster://:****@h1:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "a # in a Sentinel's password, its primary forgotten|store: redis-sentinel://a_b#cd@h1:26379\\npolicies: []|t.yaml:1: store: bad Redis address \"redis-sentinel://****@h1:26379\": a # in the credentials (in a password, written %23); the primary's name comes after the nodes: redis-sentinel://host:port,host:port#name",
            "an @ and a comma in a Cluster's password|store: redis-cluster://:a@b,c@h1:7000\\npolicies: []|t.yaml:1: store: bad Redis address \"redis-cluster://:****@h1:7000\": a part between commas without credentials comes before one with them, or parts carry different ones, and may be pieces of a password (a comma in a password is written %2C, an @ %40; credentials go on the first node, or the same on each)",
            "a # in a password|store: redis://:pa#ss@h1:7000\\npolicies: []|t.yaml:1: store: bad Redis address \"redis://:****@h1:7000\": not read as written (in a password, characters such as #, ?, /, @ and , are written percent-encoded: %23 for #)",
            "a leaky queue with a negative max_delay|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: leaky-bucket\\n    limits: [5/1s]\\n    mode: delay\\n    max_delay: -1s|t.yaml:7: policies[0].max_delay: bad duration \"-1s\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "an unknown key part|policies:\\n  - name: p\\n    key: [jwt:sub]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:3: policies[0].key[0]: unknown key part \"jwt:sub\": expected ip, header:NAME, cookie:NAME, query:NAME, route, method, host, user, descriptor:KEY or const:TEXT",
            "a negative cost|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    cost: -2|t.yaml:6: policies[0].cost: expected a whole number >= 0, got \"-2\"",
            "delay without max_delay|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    mode: delay|t.yaml:6: policies[0].mode: mode: delay needs max_delay",
            "a bad mode|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    mode: wall|t.yaml:6: policies[0].mode: expected reject, delay or shadow (or shaping, leaky-bucket's delay), got \"wall\"",
            "shaping on a token bucket|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: token-bucket\\n    limits: [1/1s]\\n    mode: shaping|t.yaml:6: policies[0].mode: shaping is leaky-bucket's queue; token-bucket delays with mode: delay",
            "a bad store|store: mongo://x\\npolicies: []|t.yaml:1: store: expected memory, redis://host:port[/db], redis-cluster://h1:p1,h2:p2 or redis-sentinel://h1:p1,h2:p2[/db]#primary (rediss://, rediss-cluster://, rediss-sentinel:// over TLS), got \"mongo://x\"",
            "a bad proxy|trusted_proxies: [10.0.0.300/8]\\npolicies: []|t.yaml:1: trusted_proxies[0]: expected a network such as 10.0.0.0/8 or 2001:db8::/32, or an address, got \"10.0.0.300/8\"",
            "a key part given twice|policies:\\n  - name: p\\n    key: [ip, route, ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:3: policies[0].key[2]: key part \"ip\" is given twice (also at policies[0].key[0]): the same part twice keys as once",
            "a key header given twice in two spellings|policies:\\n  - name: p\\n    key: [header:X-A, header:x-a]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:3: policies[0].key[1]: key part \"header:x-a\" is given twice (also at policies[0].key[0]): the same part twice keys as once",
            "a proxy network with host bits|trusted_proxies: [10.0.0.1/8]\\npolicies: []|t.yaml:1: trusted_proxies[0]: \"10.0.0.1/8\" has bits set past its /8: write the network 10.0.0.0/8, or 10.0.0.1/32 for the one address",
            "a bad header set|headers: [ietf, modern]\\npolicies: []|t.yaml:1: headers[1]: expected ietf or legacy, got \"modern\"",
            "no policies|store: memory|t.yaml:1: policies: missing; at least one policy is needed",
            "empty policies|policies: []|t.yaml:1: policies: at least one policy is needed",
            "an Envoy policy that also matches a path|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [user]\\n      path: /api/**\\n    key: [descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:6: policies[0].match.path: a policy of match.domain decides descriptors from Envoy, which have no path; match HTTP requests in a policy of their own",
            "a domain without a descriptor|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n    key: [const:all]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.descriptor: missing",
            "a descriptor without a domain|policies:\\n  - name: p\\n    match:\\n      descriptor: [user]\\n    key: [descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.domain: missing",
            "an empty descriptor|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: []\\n    key: [const:all]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:5: policies[0].match.descriptor: at least one entry is needed, KEY or KEY=VALUE",
            "a burst in the limit and the policy|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    burst: 7\\n    limits:\\n      - 10/1s burst=5|t.yaml:7: policies[0].limits[0]: \"10/1s burst=5\" gives its own burst, and the policy's burst would replace it: give it in one place",
            "a refill in the limit and the policy|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: token-bucket\\n    refill: greedy\\n    limits: [10/1s refill=interval]|t.yaml:6: policies[0].limits[0]: \"10/1s refill=interval\" gives its own refill, and the policy's refill would replace it: give it in one place",
            "a limit's burst its algorithm takes none of|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: fixed-window\\n    limits:\\n      - 10/1s\\n      - 20/1m burst=50|t.yaml:7: policies[0].limits[1]: limit 20/1m burst=50: burst is for token-bucket, gcra and leaky-bucket, not fixed-window",
            "a descriptor key twice|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [k, k=b]\\n    key: [descriptor:k]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:5: policies[0].match.descriptor[1]: key \"k\" is in the pattern already, at descriptor[0]; Sluice counts a descriptor by the values of its keys, so each key once",
            "a descriptor entry without a key|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [user, =admin]\\n    key: [const:all]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:5: policies[0].match.descriptor[1]: expected KEY or KEY=VALUE (a KEY without spaces), got \"=admin\"",
            "an Envoy policy keyed by ip|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [remote_address]\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:6: policies[0].key[0]: an Envoy descriptor carries only its entries: expected descriptor:KEY with a KEY of match.descriptor [remote_address], or const:TEXT, got \"ip\"",
            "an Envoy policy keyed by an entry it does not match|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [remote_address]\\n    key: [descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:6: policies[0].key[0]: an Envoy descriptor carries only its entries: expected descriptor:KEY with a KEY of match.descriptor [remote_address], or const:TEXT, got \"descriptor:user\"",
            "an HTTP policy keyed by a descriptor|policies:\\n  - name: p\\n    key: [ip, descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:3: policies[0].key[1]: descriptor:user reads an Envoy descriptor: the policy needs match.domain and match.descriptor",
            "an Envoy policy that delays|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [user]\\n    key: [descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    mode: delay\\n    max_delay: 1s|t.yaml:9: policies[0].mode: Envoy admits or refuses a request at once, so a policy of match.domain cannot delay it: use reject or shadow",
            "an Envoy policy counting requests in flight|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [user]\\n    key: [descriptor:user]\\n    algorithm: concurrency\\n    limits: [1/1s]|t.yaml:7: policies[0].algorithm: Envoy does not tell the rate limit service when a request is over, so a policy of match.domain cannot count requests in flight",
            "an Envoy policy with a cost header|policies:\\n  - name: p\\n    match:\\n      domain: edge\\n      descriptor: [user]\\n    key: [descriptor:user]\\n    algorithm: gcra\\n    limits: [1/1s]\\n    cost: header:X-Cost|t.yaml:9: policies[0].cost: a descriptor has no headers: its cost is its hits_addend times a whole-number cost",
            "no methods|policies:\\n  - name: p\\n    match:\\n      methods: []\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.methods: an empty list matches no request; list the methods, or leave methods out to match every one",
            "a host with a final dot|policies:\\n  - name: p\\n    match:\\n      host: api.example.com.\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: a host is matched without its final dot: write \"api.example.com\", not \"api.example.com.\"",
            "a host with a port|policies:\\n  - name: p\\n    match:\\n      host: API.example.com:8443\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: a host is matched without its port: write \"api.example.com\", not \"api.example.com:8443\"",
            "an empty host|policies:\\n  - name: p\\n    match:\\n      host: \"\"\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: must not be empty; leave host out to match every host",
            "a limit given twice|policies:\\n  - name: p\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [5/1s,\\n             5/1s]|t.yaml:6: policies[0].limits[1]: the same limit as limits[0], 5/1s",
            "an IPv6 host without brackets|policies:\\n  - name: p\\n    match:\\n      host: ::1\\n    key: [ip]\\n    algorithm: gcra\\n    limits: [1/1s]|t.yaml:4: policies[0].match.host: an IPv6 address is written in brackets, as a Host header carries it: \"[::1]\"",
            "a password the store cannot read|store: redis://:pa{ss@localhost:6379\\npolicies: []|t.yaml:1: store: bad Redis address \"redis://:****@localhost:6379\": not a valid URI (in a password, characters such as a space, /, %, {, # are written percent-encoded: %20 for a space)",
            "a password shown nowhere|store: redis://:s3cret@local host:6379\\npolicies: []|t.yaml:1: store: bad Redis address \":****@local host:6379\" in \"redis://:****@local host:6379\": expected host:port[/db]",
            "not YAML|policies: [a, b|t.yaml:1: not valid YAML: expected ',' or ']', but got <stream end>",
    })
    void refusesABadFileNamingLineAndField(String problem, String text, String message) {
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", text.replace("\\n", "\n")))
                .isInstanceOf(ConfigException.class).hasMessage(message);
    }

    /**
     * A Sentinel's credentials run to the last @: a piece of a password between an @ and a comma is no sentinel, and
     * was refused as a bad one, quoted (the diff review); the password {@code a@b_c,d} is the primary's, as written.
     */
    @Test
    void aSentinelsPasswordIsNeverTakenForASentinel() throws ConfigException {
        assertThat(ConfigLoader.parse("t.yaml", "store: redis-sentinel://:a@b_c,d@h1:26379#m\n" + GOOD).store())
                .isEqualTo("redis-sentinel://:a@b_c,d@h1:26379#m");
    }

    @Test
    void aNumberInDigitsOfAnotherScriptIsRefused() {
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "policies:\n  - name: p\n    key: [ip]\n"
                + "    algorithm: gcra\n    limits: [1/1s]\n    burst: \u0665\n")).isInstanceOf(ConfigException.class)
                .hasMessage("t.yaml:6: policies[0].burst: expected a whole number >= 1, got \"\u0665\"");
    }

    /** A past bug: a control character was reported on line 1, wherever it was. */
    @Test
    void aCharacterYamlDoesNotAllowIsReportedOnItsLine() {
        // the comment's emoji is two chars of one code point: the line must be counted by code points
        String text = "# limits for \uD83D\uDE80 launch\npolicies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n"
                + "    limits: [10/1s]\n    mode: re\u0001ject\n";
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", text)).isInstanceOf(ConfigException.class)
                .hasMessage("t.yaml:7: not valid YAML: special characters are not allowed (U+0001)");
        // past SnakeYAML's first buffer of 1,024 chars, whose position restarts (a past bug said line 8 for 58)
        String long_ = "# a comment that makes the file long enough\n".repeat(57) + "policies: [\u0001]\n";
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", long_)).isInstanceOf(ConfigException.class)
                .hasMessage("t.yaml:58: not valid YAML: special characters are not allowed (U+0001)");
        // right after a line break that follows the emoji: a count by chars would put it on line 1
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "#\uD83D\uDE80\n\u0001")).isInstanceOf(ConfigException.class)
                .hasMessage("t.yaml:2: not valid YAML: special characters are not allowed (U+0001)");
    }

    @Test
    void acceptsOnMemoryWhatIsBeyondTheRedisStore() throws ConfigException {
        // Lua's doubles bound the Redis store, not Sluice: in memory every period and burst is exact
        ServerConfig config = ConfigLoader.parse("t.yaml", "policies:\n  - name: p\n    key: [ip]\n    algorithm: gcra\n"
                + "    limits: [1/200d]\n    burst: 10\n    mode: delay\n    max_delay: 60d\n");
        assertThat(config.policy("p").rule().limits()).containsExactly(Limit.parse("1/200d burst=10"));
        assertThat(config.policy("p").rule().maxDelayNanos()).isEqualTo(60 * 86_400_000_000_000L);
    }

    /** A review found a Cluster's nodes with passwords refused, as "bad Redis address" of the first. */
    @Test
    void acceptsRedisAddressesWithPasswords() throws ConfigException {
        for (String store : List.of("redis://:s3cret@localhost:6379/2", "redis://user:s3cret@localhost:6379",
                "redis-cluster://:s3cret@10.0.0.1:7000,:s3cret@10.0.0.2:7001",
                "redis-cluster://user:s3cret@a:7000,b:7001")) {
            assertThat(ConfigLoader.parse("t.yaml", "store: " + store + "\n" + GOOD).store()).isEqualTo(store);
        }
    }

    @Test
    void acceptsAMinimalFileWithTheDefaults() throws ConfigException {
        ServerConfig config = ConfigLoader.parse("t.yaml", GOOD);
        assertThat(config.store()).isEqualTo("memory");
        assertThat(config.maxKeys()).isEqualTo(1_000_000);
        // spec/server.md's defaults, which examples/sluice.yaml writes out (a review found them pinned only there)
        assertThat(config.onStoreFailure()).isEqualTo(FailurePolicy.OPEN);
        assertThat(config.storeTimeoutNanos()).isEqualTo(50_000_000L);
        assertThat(ConfigLoader.parse("t.yaml", "max_keys: 5000\n" + GOOD).maxKeys()).isEqualTo(5_000);
        assertThat(config.policy("p").maxKeys()).as("on the shared store").isZero();
        assertThat(ConfigLoader.parse("t.yaml", GOOD + "    max_keys: 300\n").policy("p").maxKeys()).isEqualTo(300);
        assertThat(config.policy("p").cost()).isEqualTo(1);
        assertThat(config.policy("p").match()).isEqualTo(PolicyConfig.Match.ALL);
    }

    /** What cannot be a configuration is refused with its reason, never read until the heap runs out. */
    @Test
    void refusesWhatIsNotAConfigurationFile(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        assertThatThrownBy(() -> ConfigLoader.load(Path.of("/dev/zero")))
                .hasMessage("/dev/zero: not a regular file");
        assertThatThrownBy(() -> ConfigLoader.load(dir)).hasMessage(dir + ": not a regular file (a directory)");
        // found by trying the CLI: an empty path was read as the working directory (": not a regular file")
        assertThatThrownBy(() -> ConfigLoader.load(Path.of(""))).hasMessage("the path is empty: name a file");
        Path large = java.nio.file.Files.write(dir.resolve("large.yaml"), new byte[dev.sluice.server.config.TextFile.MAX_BYTES + 1]);
        assertThatThrownBy(() -> ConfigLoader.load(large)).hasMessage(large + ": larger than 16 MiB, too large for a configuration");
        Path latin1 = java.nio.file.Files.write(dir.resolve("latin1.yaml"),
                "policies:\n  - name: caf\u00e9\n".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
        assertThatThrownBy(() -> ConfigLoader.load(latin1)).hasMessage(latin1 + ":2: not valid UTF-8 (byte 24)");
    }

    /** store_trust names the certificates of a TLS store, at its line, relative to the file; nothing else takes it. */
    @Test
    void storeTrustIsForATlsStoreAndMustHoldCertificates(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        String policies = GOOD;
        Path plain = java.nio.file.Files.writeString(dir.resolve("plain.yaml"),
                "store: redis://127.0.0.1:6379\nstore_trust: ca.pem\n" + policies);
        assertThatThrownBy(() -> ConfigLoader.load(plain)).hasMessage(plain + ":2: store_trust: the certificates a TLS"
                + " store trusts; the store is not one (rediss://, rediss-cluster:// or rediss-sentinel://), got redis://127.0.0.1:6379");
        Path missing = java.nio.file.Files.writeString(dir.resolve("missing.yaml"),
                "store: rediss://127.0.0.1:6379\nstore_trust: ca.pem\n" + policies);
        assertThatThrownBy(() -> ConfigLoader.load(missing)).hasMessageStartingWith(missing + ":2: store_trust: "
                + dir.resolve("ca.pem") + ": cannot read the certificates to trust");
        java.nio.file.Files.writeString(dir.resolve("ca.pem"), "not a certificate\n");
        assertThatThrownBy(() -> ConfigLoader.load(missing)).hasMessageStartingWith(missing + ":2: store_trust: "
                + dir.resolve("ca.pem") + ": not PEM certificates");
        // a TLS Cluster is a store too
        assertThat(ConfigLoader.parse("t.yaml", "store: rediss-cluster://127.0.0.1:7000,127.0.0.1:7001\n" + policies)
                .store()).isEqualTo("rediss-cluster://127.0.0.1:7000,127.0.0.1:7001");
        // and sentinels over TLS, their certificates checked with the primary's
        java.nio.file.Files.copy(dev.sluice.testkit.redis.SelfSignedCertificate.make(dir, "ip:127.0.0.1").certificate(),
                dir.resolve("ca.pem"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Path sentinels = java.nio.file.Files.writeString(dir.resolve("sentinels.yaml"),
                "store: rediss-sentinel://127.0.0.1:26379,127.0.0.1:26380#main\nstore_trust: ca.pem\n" + policies);
        assertThat(ConfigLoader.load(sentinels).storeTrust()).isEqualTo(dir.resolve("ca.pem"));
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "store: rediss-sentinel://127.0.0.1:26379\n" + GOOD))
                .hasMessageContaining("a Sentinel address names the primary its sentinels watch, after #");
    }

    /**
     * {@code reject_status}, as nginx's {@code limit_req_status}: the status of a request a policy rejects, for every
     * HTTP policy, or one policy's own; never one that is not an error, and never a descriptor's (Envoy's filter
     * chooses its own).
     */
    @Test
    void theRejectStatusIsAnErrorForEveryPolicyOrOne() throws Exception {
        String two = """
                policies:
                  - name: a
                    key: [ip]
                    algorithm: gcra
                    limits: [1/1s]
                  - name: b
                    key: [ip]
                    algorithm: gcra
                    limits: [1/1s]
                    reject_status: 403
                """;
        assertThat(ConfigLoader.parse("t.yaml", two).policies()).extracting(PolicyConfig::rejectStatus)
                .containsExactly(429, 403);
        assertThat(ConfigLoader.parse("t.yaml", "reject_status: 503\n" + two).policies())
                .extracting(PolicyConfig::rejectStatus).containsExactly(503, 403);
        for (String bad : List.of("200", "600", "399", "4290", "abc", "\"\"")) {
            assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "reject_status: " + bad + "\n" + two))
                    .hasMessage("t.yaml:1: reject_status: expected an HTTP status from 400 to 599, such as 429 (the"
                            + " default) or 503 (nginx's), got \"" + bad.replace("\"", "") + "\"");
        }
        // and its body, Kong's error_message: a JSON object, every policy's or one's
        ServerConfig bodies = ConfigLoader.parse("t.yaml", "reject_body: '{\"message\": \"API rate limit exceeded\"}'\n"
                + two.replace("    reject_status: 403\n", "    reject_status: 403\n    reject_body: '{\"error\":\"slow down\"}'\n"));
        assertThat(bodies.policies()).extracting(policy -> policy.rejection().body())
                .containsExactly("{\"message\":\"API rate limit exceeded\"}", "{\"error\":\"slow down\"}");
        for (String[] bad : new String[][] {
                {"'[1, 2]'", "expected a JSON object, such as '{\"message\": \"API rate limit exceeded\"}', got \"[1, 2]\""},
                {"'{\"a\": 1, \"a\": 2}'", "not JSON: Duplicate field 'a'; expected a JSON object, such as"
                        + " '{\"message\": \"API rate limit exceeded\"}'"},
                {"'{} {}'", "not JSON: Trailing token (of type START_OBJECT) found after value (bound as"
                        + " `com.fasterxml.jackson.databind.JsonNode`): not allowed as per"
                        + " `DeserializationFeature.FAIL_ON_TRAILING_TOKENS`; expected a JSON object, such as"
                        + " '{\"message\": \"API rate limit exceeded\"}'"}}) {
            assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "reject_body: " + bad[0] + "\n" + two))
                    .hasMessage("t.yaml:1: reject_body: " + bad[1]);
        }
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", two.replace("403", "302")))
                .hasMessage("t.yaml:10: policies[1].reject_status: expected an HTTP status from 400 to 599, such as 429"
                        + " (the default) or 503 (nginx's), got \"302\"");
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", """
                policies:
                  - name: d
                    match: {domain: edge, descriptor: [user]}
                    key: [descriptor:user]
                    algorithm: gcra
                    limits: [1/1s]
                    reject_status: 503
                """)).hasMessage("t.yaml:7: policies[0].reject_status: is for HTTP requests; Envoy answers a descriptor"
                + " over its limit as its rate limit filter is told (rate_limited_status)");
    }

    /**
     * The Redis password apart from the address, from a secret: a file (its one line, relative to this file) or an
     * environment variable; never shown, never with one in the address too, never for memory.
     */
    @Test
    void theStorePasswordComesFromAFileOrTheEnvironment(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        java.nio.file.Files.writeString(dir.resolve("pw"), "s3 cr@t/%\n");
        Path config = java.nio.file.Files.writeString(dir.resolve("a.yaml"),
                "store: redis://127.0.0.1:6379\nstore_password_file: pw\n" + GOOD);
        ServerConfig read = ConfigLoader.load(config);
        assertThat(read.storePassword().value()).isEqualTo("s3 cr@t/%");
        assertThat(read.storePassword().file()).isEqualTo(dir.resolve("pw"));
        assertThat(read.toString()).doesNotContain("s3 cr@t").contains("password from " + dir.resolve("pw"));
        String path = System.getenv("PATH"); // an environment variable every test run has
        assertThat(ConfigLoader.parse("t.yaml", "store: redis://127.0.0.1:6379\nstore_password_env: PATH\n" + GOOD)
                .storePassword().value()).isEqualTo(path);
        String unset = "SLUICE_UNSET_" + System.nanoTime();
        String[][] bad = {
            {"store: redis://127.0.0.1:6379\nstore_password_env: " + unset + "\n", "t.yaml:2: store_password_env: the"
                    + " environment variable " + unset + " is not set"},
            {"store: redis://127.0.0.1:6379\nstore_password_env: 'A-B'\n", "t.yaml:2: store_password_env: expected the"
                    + " name of an environment variable, such as REDIS_PASSWORD, got \"A-B\""},
            {"store: redis://:inline@127.0.0.1:6379\nstore_password_env: PATH\n", "t.yaml:2: store_password_env: the"
                    + " store's address has a password of its own (redis://:****@127.0.0.1:6379); give it once"},
            {"store_password_env: PATH\n", "t.yaml:1: store_password_env: the password of a Redis store; the store is"
                    + " memory"},
            {"store: redis://127.0.0.1:6379\nstore_password_file: pw\nstore_password_env: PATH\n", "t.yaml:3:"
                    + " store_password_env: the password is given by store_password_file already (line 2); give one of"
                    + " the two"},
        };
        for (String[] one : bad) {
            assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", one[0] + GOOD)).hasMessage(one[1]);
        }
        java.nio.file.Files.writeString(dir.resolve("empty"), "\n");
        java.nio.file.Files.writeString(dir.resolve("two"), "a\nb\n");
        for (String[] one : new String[][] {{"empty", "holds no password (the file is empty)"},
                {"two", "holds more than one line; a password is one"},
                {"missing", "no such file"}}) {
            Path file = java.nio.file.Files.writeString(dir.resolve(one[0] + ".yaml"),
                    "store: redis://127.0.0.1:6379\nstore_password_file: " + one[0] + "\n" + GOOD);
            assertThatThrownBy(() -> ConfigLoader.load(file)).hasMessageStartingWith(file + ":2: store_password_file: "
                    + dir.resolve(one[0]) + ": " + one[1]);
        }
    }

    /** {@code match.headers} and {@code replaces}: read, and each mistake told at its line. */
    @Test
    void headersToMatchAndPoliciesToReplace() throws Exception {
        String two = """
                policies:
                  - name: premium
                    match: {path: /api/**, headers: {X-Plan: premium, x-region: eu}}
                    key: [ip]
                    algorithm: gcra
                    limits: [10/1s]
                    replaces: [basic]
                  - name: basic
                    key: [ip]
                    algorithm: gcra
                    limits: [1/1s]
                """;
        ServerConfig read = ConfigLoader.parse("t.yaml", two);
        assertThat(read.policy("premium").match().headers()).containsExactly(
                java.util.Map.entry("x-plan", "premium"), java.util.Map.entry("x-region", "eu"));
        assertThat(read.policy("premium").replaces()).containsExactly("basic");
        assertThat(read.policy("basic").replaces()).isEmpty();
        String[][] bad = {
            {two.replace("replaces: [basic]", "replaces: [nobody]"), "t.yaml:7: policies[0].replaces[0]: no policy of"
                    + " this file is named \"nobody\""},
            {two.replace("replaces: [basic]", "replaces: [premium]"), "t.yaml:7: policies[0].replaces[0]: a policy"
                    + " cannot replace itself"},
            {two.replace("replaces: [basic]", "replaces: [basic, basic]"), "t.yaml:7: policies[0].replaces[1]:"
                    + " \"basic\" is named twice"},
            {two.replace("replaces: [basic]", "replaces: []"), "t.yaml:7: policies[0].replaces: an empty list replaces"
                    + " nothing; name the policies, or leave replaces out"},
            {two.replace("headers: {X-Plan: premium, x-region: eu}", "headers: [X-Plan]"), "t.yaml:3:"
                    + " policies[0].match.headers: expected a mapping of header names to values, such as {X-Plan:"
                    + " premium}"},
            {two.replace("x-region: eu", "x-plan: gold"), "t.yaml:3: policies[0].match.headers.x-plan: given twice"
                    + " (header names are one in any case)"},
            {two.replace("x-region: eu", "\"bad name\": eu"), "t.yaml:3: policies[0].match.headers: \"bad name\" is no"
                    + " header name"},
            {two.replace("x-region: eu", "x-region: ' eu'"), "t.yaml:3: policies[0].match.headers.x-region: \" eu\""
                    + " never matches: a header's value is read without the spaces around it"},
            {two + "    replaces: [premium]\n", "t.yaml:7: policies[0].replaces[0]: the policies replace one another in"
                    + " a cycle (premium replaces basic replaces premium): a request all of them charge would be charged"
                    + " by none"},
        };
        for (String[] one : bad) {
            assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", one[0])).hasMessage(one[1]);
        }
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", two + """
                  - name: envoy
                    match: {domain: edge, descriptor: [user]}
                    key: [descriptor:user]
                    algorithm: gcra
                    limits: [1/1s]
                    replaces: [basic]
                """)).hasMessage("t.yaml:17: policies[2].replaces: is for HTTP requests; a policy of Envoy's descriptors"
                + " is replaced as in Envoy's files (a limit's replaces)");
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", two.replace("replaces: [basic]", "replaces: [envoy]")
                + """
                  - name: envoy
                    match: {domain: edge, descriptor: [user]}
                    key: [descriptor:user]
                    algorithm: gcra
                    limits: [1/1s]
                """)).hasMessage("t.yaml:7: policies[0].replaces[0]: \"envoy\" decides Envoy's descriptors, not HTTP"
                + " requests");
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", """
                policies:
                  - name: envoy
                    match: {domain: edge, descriptor: [user], headers: {X-Plan: premium}}
                    key: [descriptor:user]
                    algorithm: gcra
                    limits: [1/1s]
                """)).hasMessage("t.yaml:3: policies[0].match.headers: a policy of match.domain decides descriptors from"
                + " Envoy, which have no headers; match HTTP requests in a policy of their own");
    }

    /** A primary found through Redis Sentinel: its sentinels, a database, the name they watch it under. */
    @Test
    void aStoreThroughSentinelNamesItsSentinelsAndItsPrimary() throws Exception {
        assertThat(ConfigLoader.parse("t.yaml", "store: redis-sentinel://:pw@127.0.0.1:26379,127.0.0.1:26380/2#main\n"
                + GOOD).store()).isEqualTo("redis-sentinel://:pw@127.0.0.1:26379,127.0.0.1:26380/2#main");
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "store: redis-sentinel://127.0.0.1:26379\n" + GOOD))
                .hasMessage("t.yaml:1: store: bad Redis address \"redis-sentinel://127.0.0.1:26379\": a Sentinel address"
                        + " names the primary its sentinels watch, after #: redis-sentinel://host:port,host:port#name");
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", "store: redis-sentinel://127.0.0.1:26379,bad host#m\n"
                + GOOD)).hasMessage("t.yaml:1: store: bad Redis address \"bad host\" in \"redis-sentinel://127.0.0.1:26379,bad"
                + " host#m\": expected host:port,host:port");
    }

    /**
     * A line of a mebibyte or more is refused at its line: the YAML parser's time grows with the square of a line's
     * length (a review measured 7 s for one line of 4 MiB), so a 16 MiB file of one line would hold a start for minutes.
     */
    @Test
    void refusesALineTooLongToParseInGoodTime() throws Exception {
        String longest = "# " + "x".repeat((1 << 20) - 2);
        assertThat(ConfigLoader.parse("t.yaml", longest + "\n" + GOOD).policies()).hasSize(1);
        assertThatThrownBy(() -> ConfigLoader.parse("t.yaml", GOOD + longest + "x\n"))
                .hasMessage("t.yaml:6: a line of 1048577 characters, longer than the 1048576 read: break it up (a list"
                        + " may take one item a line)");
    }

    @Test
    void namesAMissingFile() {
        assertThatThrownBy(() -> ConfigLoader.load(Path.of("/no/such/sluice.yaml")))
                .hasMessage("/no/such/sluice.yaml: no such file");
    }
}
