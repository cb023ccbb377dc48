package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.store.Store;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A standalone store through Redis Sentinel ({@code redis-sentinel://}): real sentinels, a primary and its replica.
 * The primary is found through the sentinels, and found again after they fail over to the replica.
 */
class RedisSentinelTest {
    private static final Rule RULE = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1000/1h")));

    @Test
    void decidesOnThePrimaryTheSentinelsNameAndFollowsTheirFailover() throws Exception {
        try (RedisServer primary = RedisServer.start();
             RedisServer replica = RedisServer.start("--replicaof", "127.0.0.1", Integer.toString(primary.port()));
             RedisServer sentinel = RedisServer.startSentinel("sluice-primary", primary, 1)) {
            awaitReplicaKnown(sentinel, replica.port());
            String uri = "redis-sentinel://127.0.0.1:" + sentinel.port() + "#sluice-primary";
            try (RedisStore store = RedisStore.builder(uri).timeout(Duration.ofSeconds(2)).raiseFailures(true).build()) {
                assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).remaining()).isEqualTo(999);
                try (Resp resp = primary.connect()) {
                    assertThat(resp.call("EXISTS", "sluice:{k}")).as("on the primary").isEqualTo(1L);
                }
                primary.kill();
                assertFailedOver(store, replica);
            }
        }
    }

    @Test
    void aPrimaryNoSentinelKnowsIsRefusedNamingEachSentinel() throws Exception {
        try (RedisServer primary = RedisServer.start();
             RedisServer sentinel = RedisServer.startSentinel("sluice-primary", primary, 1)) {
            // a sentinel that is not there is passed over for the next
            try (RedisStore store = RedisStore.builder("redis-sentinel://127.0.0.1:1,127.0.0.1:" + sentinel.port()
                    + "#sluice-primary")
                    .timeout(Duration.ofSeconds(10)).raiseFailures(true).build()) {
                assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).allowed()).isTrue();
            }
            String uri = "redis-sentinel://127.0.0.1:" + sentinel.port() + "#another";
            assertThatThrownBy(() -> RedisStore.connect(uri)).hasMessageContaining("no sentinel gave the address of"
                    + " primary another (127.0.0.1:" + sentinel.port() + " knows no primary of that name)");
        }
        // a sentinel without its port (26379), and sentinels of IPv6, are read as Lettuce reads them (a review found
        // them refused)
        io.lettuce.core.RedisURI read = RedisAddress.seeds("redis-sentinel://:pw@sentinel-a,sentinel-b:26380/2#main",
                Duration.ofSeconds(1)).get(0);
        assertThat(read.getSentinels()).extracting(io.lettuce.core.RedisURI::getHost, io.lettuce.core.RedisURI::getPort)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("sentinel-a", 26379),
                        org.assertj.core.groups.Tuple.tuple("sentinel-b", 26380));
        assertThat(read.getSentinelMasterId()).isEqualTo("main");
        assertThat(read.getDatabase()).isEqualTo(2);
        assertThat(new String(read.getPassword())).isEqualTo("pw");
        RedisStore.checkAddress("redis-sentinel://[::1]:26379,[::1]:26380/2#m");
        assertThatThrownBy(() -> RedisStore.connect("redis-sentinel://127.0.0.1:26379"))
                .hasMessage("bad Redis address \"redis-sentinel://127.0.0.1:26379\": a Sentinel address names the primary"
                        + " its sentinels watch, after #: redis-sentinel://host:port,host:port#name");
        assertThatThrownBy(() -> RedisStore.connect("redis-sentinel://127.0.0.1:0#p"))
                .hasMessage("bad Redis address \"redis-sentinel://127.0.0.1:0#p\": port \"0\" of 127.0.0.1:0: expected 1"
                        + " to 65535");
    }

    /**
     * Sentinels with a password ({@code requirepass}), the primary's, as the common deployments set them: the
     * address's credentials are given to them too. A past weakness: they were asked without, and answered
     * {@code NOAUTH}, and no store could be made. A wrong password is told with the sentinel's own refusal.
     */
    @Test
    void sentinelsWithThePrimarysPasswordAreGivenIt() throws Exception {
        try (RedisServer primary = RedisServer.start()) {
            try (Resp resp = primary.connect()) {
                resp.call("CONFIG", "SET", "requirepass", "s3cret"); // the fixture waits for an open PING first
            }
            try (RedisServer sentinel = RedisServer.startSentinel("sluice-primary", primary, 1, "requirepass s3cret",
                    "sentinel auth-pass sluice-primary s3cret")) {
                try (RedisStore store = RedisStore.builder("redis-sentinel://:s3cret@127.0.0.1:" + sentinel.port()
                        + "#sluice-primary").timeout(Duration.ofSeconds(10)).raiseFailures(true).build()) {
                    assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).allowed()).isTrue();
                }
                // given apart from the address (from a secret), to the sentinels too
                try (RedisStore store = RedisStore.builder("redis-sentinel://127.0.0.1:" + sentinel.port()
                        + "#sluice-primary").password("s3cret").timeout(Duration.ofSeconds(10)).raiseFailures(true)
                        .build()) {
                    assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).allowed()).isTrue();
                }
                assertThatThrownBy(() -> RedisStore.connect("redis-sentinel://:wrong@127.0.0.1:" + sentinel.port()
                        + "#sluice-primary")).hasMessageContaining("127.0.0.1:" + sentinel.port() + " answered NOAUTH")
                        .hasMessageContaining("(AUTH with the address's credentials answered: WRONGPASS");
            }
        }
    }

    /**
     * {@code rediss-sentinel://}: sentinels that speak TLS, as a deployment with {@code tls-replication} has them, are
     * asked over TLS, and the primary they name is reached over TLS, each certificate checked against the trust given.
     * A past weakness: only plain sentinels could be asked.
     */
    @Test
    void sentinelsOverTlsAreAskedOverTlsAndNameAPrimaryReachedOverTls() throws Exception {
        try (TemporaryCertificate certificate = TemporaryCertificate.make("ip:127.0.0.1");
             RedisServer primary = RedisServer.startTls(certificate.certificate());
             RedisServer sentinel = RedisServer.startTlsSentinel("sluice-primary", primary, 1,
                     certificate.certificate())) {
            String uri = "rediss-sentinel://127.0.0.1:" + sentinel.tlsPort() + "#sluice-primary";
            try (RedisStore store = RedisStore.builder(uri).trust(certificate.trusted()).timeout(Duration.ofSeconds(10))
                    .raiseFailures(true).build()) {
                assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).remaining()).isEqualTo(999);
                try (Resp resp = primary.connect()) {
                    assertThat(resp.call("EXISTS", "sluice:{k}")).as("on the primary").isEqualTo(1L);
                }
            }
            // the sentinel's certificate is checked: the JVM's own trust (public CAs) refuses it, naming the sentinel
            assertThatThrownBy(() -> RedisStore.connect(uri)).hasMessageContaining("no sentinel gave the address of"
                    + " primary sluice-primary (127.0.0.1:" + sentinel.tlsPort() + ": TLS handshake failed: its"
                    + " certificate is signed by none of the certificates trusted");
            // a sentinel's plain port asked over TLS is silent (it waits for the end of a line): said with the step
            assertThatThrownBy(() -> RedisStore.builder("rediss-sentinel://127.0.0.1:" + sentinel.port()
                    + "#sluice-primary").trust(certificate.trusted()).build())
                    .hasMessageContaining("(127.0.0.1:" + sentinel.port() + ": no answer within 2000 ms (TLS handshake,"
                            + " then SENTINEL GET-MASTER-ADDR-BY-NAME))");
        }
    }

    /**
     * A failover through sentinels over TLS: the promoted replica's TLS port, which the sentinels name after it, is
     * reached over TLS. A past note left it untested (the path is the plain one's, with TLS on each connection).
     */
    @Test
    void sentinelsOverTlsAreFollowedThroughTheirFailover() throws Exception {
        try (TemporaryCertificate certificate = TemporaryCertificate.make("ip:127.0.0.1");
             RedisServer primary = RedisServer.startTls(certificate.certificate());
             RedisServer replica = RedisServer.startTlsReplica(certificate.certificate(), primary);
             RedisServer sentinel = RedisServer.startTlsSentinel("sluice-primary", primary, 1,
                     certificate.certificate())) {
            awaitReplicaKnown(sentinel, replica.tlsPort()); // the port it names, tls-replication being on
            String uri = "rediss-sentinel://127.0.0.1:" + sentinel.tlsPort() + "#sluice-primary";
            try (RedisStore store = RedisStore.builder(uri).trust(certificate.trusted()).timeout(Duration.ofSeconds(2))
                    .raiseFailures(true).build()) {
                assertThat(store.decide(RULE, "k", 1, Store.STORE_CLOCK).remaining()).isEqualTo(999);
                try (Resp resp = primary.connect()) { // replication is asynchronous: k on the replica before the kill
                    assertThat(resp.call("WAIT", "1", "5000")).isEqualTo(1L);
                }
                primary.kill();
                assertFailedOver(store, replica);
                try (Resp resp = replica.connect()) {
                    assertThat(resp.call("EXISTS", "sluice:{k}")).as("replicated before the failover").isEqualTo(1L);
                }
            }
        }
    }

    /**
     * Decisions resume, within a minute, on {@code replica}, which the sentinels promote once they take the primary
     * for down (after a second without an answer).
     */
    private static void assertFailedOver(RedisStore store, RedisServer replica) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        boolean decided = false;
        while (!decided && System.nanoTime() < deadline) {
            try {
                store.decide(RULE, "after", 1, Store.STORE_CLOCK);
                decided = true;
            } catch (RuntimeException notYet) {
                Thread.sleep(100);
            }
        }
        assertThat(decided).as("decisions resume on the promoted replica").isTrue();
        try (Resp resp = replica.connect()) {
            assertThat(((List<?>) resp.call("ROLE")).get(0)).isEqualTo("master");
            assertThat(resp.call("EXISTS", "sluice:{after}")).as("decided on the replica now primary").isEqualTo(1L);
        }
    }

    /**
     * The sentinel has found the replica at {@code port} (through the primary's INFO): only then can it fail over to it.
     */
    private static void awaitReplicaKnown(RedisServer sentinel, int port) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            try (Resp resp = sentinel.connect()) {
                Object replicas = resp.call("SENTINEL", "REPLICAS", "sluice-primary");
                if (replicas instanceof List<?> list && list.toString().contains(Integer.toString(port))) {
                    return;
                }
            }
            Thread.sleep(100);
        }
        throw new AssertionError("the sentinel never found the replica");
    }
}
