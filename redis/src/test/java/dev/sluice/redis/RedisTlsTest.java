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
import java.time.Duration;
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
        try (RedisStore store = RedisStore.builder(redis.tlsUri()).trust(certificate.trusted())
                .timeout(Duration.ofSeconds(10)).build()) {
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
                    .hasMessageContaining("TLS handshake failed: No subject alternative names matching IP address"
                            + " 127.0.0.1 found");
        }
    }

    /** Lettuce's verifyPeer=NONE or CA in the address would turn the check off, for a Cluster silently: refused. */
    @Test
    void anAddressThatWouldNotCheckTheCertificateIsRefused() {
        assertThatThrownBy(() -> RedisStore.connect(redis.tlsUri() + "?verifyPeer=NONE"))
                .hasMessage("bad Redis address \"" + redis.tlsUri() + "?verifyPeer=NONE\": verifyPeer=NONE would not check"
                        + " the server's certificate at all; Sluice always checks it (give the certificates to trust)");
        assertThatThrownBy(() -> RedisStore.connect("rediss-cluster://127.0.0.1:7000?verifyPeer=CA"))
                .hasMessageContaining("verifyPeer=CA would not check that the server's certificate names the host");
    }

    /**
     * A server that sends a byte at a time cannot hold the handshake past the time to connect (2 s): each read had its
     * timeout, the whole none, and the store's start waited as long as the server liked (a review).
     */
    @Test
    void aServerThatDripsItsHandshakeIsGivenUpOn() throws Exception {
        try (java.net.ServerSocket dripping = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            Thread drip = new Thread(() -> {
                try (java.net.Socket client = dripping.accept()) {
                    for (int i = 0; i < 60; i++) {
                        client.getOutputStream().write(i == 0 ? 0x16 : 0x03); // a TLS record's first bytes, slowly
                        client.getOutputStream().flush();
                        Thread.sleep(500);
                    }
                } catch (Exception ended) {
                    // the client gave up
                }
            });
            drip.setDaemon(true);
            drip.start();
            long started = System.nanoTime();
            assertThatThrownBy(() -> RedisStore.builder("rediss://127.0.0.1:" + dripping.getLocalPort())
                    .trust(certificate.trusted()).build())
                    .hasMessageContaining("no introduction within 2000 ms (TLS handshake, then AUTH, SELECT, PING)");
            assertThat(java.util.concurrent.TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started)).isLessThan(10);
        }
    }

    /** While a standalone store cannot connect again, its failures say why the last attempt failed. */
    @Test
    void callsWhileReconnectingSayWhyTheLastAttemptFailed() throws Exception {
        try (RedisServer own = RedisServer.startTls(certificate.certificate());
             RedisStore store = RedisStore.builder(own.tlsUri()).trust(certificate.trusted()).raiseFailures(true)
                     .build()) {
            Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("2/1m")));
            store.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK);
            own.kill();
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            String said = "";
            while (!said.contains("the last attempt: ") && System.nanoTime() < deadline) {
                try {
                    store.decide(rule, "k", 1, dev.sluice.store.Store.STORE_CLOCK);
                } catch (RuntimeException e) {
                    for (Throwable at = e; at != null; at = at.getCause()) {
                        said += " | " + at.getMessage();
                    }
                }
                Thread.sleep(50);
            }
            assertThat(said).contains("(connecting again; the last attempt: Connection refused)");
        }
    }

    @Test
    void trustIsForATlsAddressAndMustBeCertificates() throws Exception {
        assertThatThrownBy(() -> RedisStore.builder(redis.uri()).trust(certificate.trusted()).build())
                .hasMessage("certificates to trust (" + certificate.trusted() + ") are for a TLS address, rediss://,"
                        + " rediss-cluster:// or rediss-sentinel://, got " + redis.uri());
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
