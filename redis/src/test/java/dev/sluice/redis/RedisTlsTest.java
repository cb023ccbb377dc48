package dev.sluice.redis;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import dev.sluice.testkit.redis.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code rediss://}: what is trusted, and what is refused, each with a message that says why. The contract itself runs
 * over TLS in {@link RedisTlsConformanceTest}.
 */
class RedisTlsTest {
    private static TemporaryCertificate certificate;
    private static RedisServer redis;

    @BeforeAll
    static void start() throws Exception {
        certificate = TemporaryCertificate.make("ip:127.0.0.1");
        redis = RedisServer.startTls(certificate.certificate());
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
        certificate.close();
    }

    @Test
    void aStoreThatTrustsTheCertificateDecides() {
        try (RedisStore store = RedisStore.builder(redis.tlsUri()).trust(certificate.trusted()).build()) {
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("2/1m")));
            assertThat(store.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK).remaining()).isEqualTo(1);
            assertThat(store.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK).remaining()).isZero();
            assertThat(store.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK).allowed()).isFalse();
        }
    }

    /** The JVM's trust store holds public CAs only: a self-signed server is refused, as it should be. */
    @Test
    void aCertificateNotTrustedIsRefusedAtConnecting() {
        assertThatThrownBy(() -> RedisStore.connect(redis.tlsUri()))
                .hasMessageContaining("Unable to connect to 127.0.0.1:" + redis.tlsUri().replaceAll(".*:", ""))
                .hasMessageContaining("TLS handshake failed");
    }

    /** A certificate for another name is refused though it is trusted: the host is checked as an HTTPS client does. */
    @Test
    void aCertificateForAnotherHostIsRefused() throws Exception {
        try (TemporaryCertificate elsewhere = TemporaryCertificate.make("dns:redis.example.com");
             RedisServer other = RedisServer.startTls(elsewhere.certificate())) {
            assertThatThrownBy(() -> RedisStore.builder(other.tlsUri()).trust(elsewhere.trusted()).build())
                    .hasMessageContaining("TLS handshake failed")
                    .hasMessageContaining("127.0.0.1");
        }
    }

    @Test
    void trustIsForATlsAddressAndMustBeCertificates() throws Exception {
        assertThatThrownBy(() -> RedisStore.builder(redis.uri()).trust(certificate.trusted()).build())
                .hasMessage("certificates to trust (" + certificate.trusted() + ") are for a TLS address, rediss://"
                        + " or rediss-cluster://, got " + redis.uri());
        Path missing = certificate.dir().resolve("missing.pem");
        assertThatThrownBy(() -> RedisStore.builder(redis.tlsUri()).trust(missing).build())
                .hasMessageStartingWith(missing + ": cannot read the certificates to trust");
        Path notPem = Files.writeString(certificate.dir().resolve("not.pem"), "hello\n");
        assertThatThrownBy(() -> RedisStore.builder(redis.tlsUri()).trust(notPem).build())
                .hasMessageStartingWith(notPem + ": not PEM certificates");
        assertThatThrownBy(() -> RedisStore.builder(redis.tlsUri()).trust(null))
                .hasMessage("certificates to trust: a PEM file is required, got null");
    }
}
