package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisCluster;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import dev.sluice.testkit.redis.SelfSignedCertificate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/** The whole contract on a real 3-master Redis Cluster reached over TLS ({@code rediss-cluster://}). */
class RedisClusterTlsConformanceTest extends StoreConformance {
    private static Path dir;
    private static RedisCluster cluster;
    private static RedisStore store;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("sluice-tls-cluster-");
        SelfSignedCertificate certificate = SelfSignedCertificate.make(dir, "ip:127.0.0.1");
        cluster = RedisCluster.startTls(3, certificate);
        store = RedisStore.builder(cluster.tlsUri()).trust(certificate.certificate()).timeout(Duration.ofSeconds(10))
                .raiseFailures(true).build();
    }

    @AfterAll
    static void stop() throws Exception {
        store.close();
        cluster.close();
        try (var files = Files.list(dir)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                Files.delete(file);
            }
        }
        Files.delete(dir);
    }

    @Override
    protected Store newStore() {
        for (RedisServer node : cluster.nodes()) {
            try (Resp resp = node.connect()) { // the plain port, the test's own
                resp.call("FLUSHALL");
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return store;
    }
}
