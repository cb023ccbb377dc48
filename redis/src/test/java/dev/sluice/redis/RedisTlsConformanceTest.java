package dev.sluice.redis;

import dev.sluice.store.Store;
import dev.sluice.testkit.StoreConformance;
import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.List;

/** The whole contract on a real Redis reached over TLS ({@code rediss://}), its certificate checked. */
class RedisTlsConformanceTest extends StoreConformance {
    private static TemporaryCertificate certificate;
    private static RedisServer redis;
    private static RedisStore store;

    @BeforeAll
    static void start() throws Exception {
        certificate = TemporaryCertificate.make("ip:127.0.0.1");
        redis = RedisServer.startTls(certificate.certificate());
        store = exactingOverTls(redis.tlsUri(), certificate);
    }

    @AfterAll
    static void stop() throws Exception {
        store.close();
        redis.close();
        certificate.close();
    }

    /** {@link SharedRedis#exacting}, over TLS. */
    static RedisStore exactingOverTls(String uri, TemporaryCertificate certificate) {
        return RedisStore.builder(uri).trust(certificate.trusted()).timeout(Duration.ofSeconds(10)).raiseFailures(true)
                .build();
    }

    /** Empties {@code servers} through their plain ports, the test's own. */
    static void flush(List<RedisServer> servers) {
        for (RedisServer server : servers) {
            try (Resp resp = server.connect()) {
                resp.call("FLUSHALL");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** The same store, emptied: every test starts from untouched keys. */
    @Override
    protected Store newStore() {
        flush(List.of(redis));
        return store;
    }
}
