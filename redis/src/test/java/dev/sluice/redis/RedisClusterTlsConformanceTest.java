package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The whole contract on a real 3-master Redis Cluster reached over TLS ({@code rediss-cluster://}). */
class RedisClusterTlsConformanceTest extends StoreConformance {
    private static TemporaryCertificate certificate;
    private static RedisCluster cluster;
    private static RedisStore store;

    @BeforeAll
    static void start() throws Exception {
        certificate = TemporaryCertificate.make("ip:127.0.0.1");
        cluster = RedisCluster.startTls(3, certificate.certificate());
        store = RedisTlsConformanceTest.exactingOverTls(cluster.tlsUri(), certificate);
    }

    @AfterAll
    static void stop() throws Exception {
        store.close();
        cluster.close();
        certificate.close();
    }

    /** A Cluster whose certificate is not trusted is refused in words of TLS, as a standalone Redis is. */
    @org.junit.jupiter.api.Test
    void aClusterNotTrustedIsRefusedSayingWhy() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> RedisStore.connect(cluster.tlsUri()))
                .hasMessage("Unable to connect: TLS handshake failed: its certificate is signed by none of the"
                        + " certificates trusted (give them with trust, or store_trust)");
    }

    @Override
    protected Store newStore() {
        RedisTlsConformanceTest.flush(cluster.nodes());
        return store;
    }
}
