package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import dev.sluice.testkit.redis.SelfSignedCertificate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/** The whole contract on a real Redis reached over TLS ({@code rediss://}), its certificate checked. */
class RedisTlsConformanceTest extends StoreConformance {
    private static Path dir;
    private static RedisServer redis;
    private static RedisStore store;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("sluice-tls-");
        SelfSignedCertificate certificate = SelfSignedCertificate.make(dir, "ip:127.0.0.1");
        redis = RedisServer.startTls(certificate);
        store = RedisStore.builder(redis.tlsUri()).trust(certificate.certificate()).timeout(Duration.ofSeconds(10))
                .raiseFailures(true).build();
    }

    @AfterAll
    static void stop() throws Exception {
        store.close();
        redis.close();
        try (var files = Files.list(dir)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                Files.delete(file);
            }
        }
        Files.delete(dir);
    }

    /** The same store, emptied (through the plain port, the test's own): every test starts from untouched keys. */
    @Override
    protected Store newStore() {
        try (Resp resp = redis.connect()) {
            resp.call("FLUSHALL");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return store;
    }
}
