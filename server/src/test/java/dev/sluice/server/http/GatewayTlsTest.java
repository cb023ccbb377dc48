package dev.sluice.server.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import io.netty.handler.ssl.SslContextBuilder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * An {@code https} upstream: reached over TLS, its certificate checked against what the gateway trusts and against
 * the host the upstream's URL names. The certificate is made for {@code localhost} by the JDK's keytool.
 */
class GatewayTlsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private static final char[] PASSWORD = "sluice-test".toCharArray();

    private static Upstream upstream;
    private static X509Certificate certificate;
    private static LiveConfig live;

    @BeforeAll
    static void start(@TempDir Path directory) throws Exception {
        Path store = directory.resolve("upstream.p12");
        Process keytool = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-genkeypair", "-alias", "upstream", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=localhost", "-ext", "SAN=dns:localhost", "-validity", "2",
                "-storetype", "PKCS12", "-keystore", store.toString(),
                "-storepass", new String(PASSWORD), "-keypass", new String(PASSWORD))
                .redirectErrorStream(true).start();
        String said = new String(keytool.getInputStream().readAllBytes());
        assertThat(keytool.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(keytool.exitValue()).as("keytool: %s", said).isZero();
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(store)) {
            keys.load(in, PASSWORD);
        }
        certificate = (X509Certificate) keys.getCertificate("upstream");
        KeyManagerFactory managers = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        managers.init(keys, PASSWORD);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(managers.getKeyManagers(), null, null);
        upstream = new Upstream(tls);
        live = LiveConfig.of(ConfigLoader.parse("gateway.yaml", """
                policies:
                  - name: elsewhere
                    match:
                      path: /limited
                    key: [const:all]
                    algorithm: fixed-window
                    limits: [1/1h]
                """), new ServerMetrics());
    }

    @AfterAll
    static void stop() throws Exception {
        live.close();
        upstream.close();
    }

    private static HttpResponse<String> get(Gateway gateway, String path) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gateway.port() + path))
                .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void anHttpsUpstreamItTrustsIsReachedOverTls() throws Exception {
        try (Gateway gateway = Gateway.start(live, URI.create("https://localhost:" + upstream.port()), "127.0.0.1", 0,
                5_000, SslContextBuilder.forClient().trustManager(certificate).build())) {
            for (String path : List.of("/elsewhere", "/download?bytes=200000")) {
                HttpResponse<String> answer = get(gateway, path);
                assertThat(answer.statusCode()).as(path).isEqualTo(200);
            }
            assertThat(get(gateway, "/elsewhere").body()).isEqualTo("hello");
            assertThat(get(gateway, "/download?bytes=200000").body()).hasSize(200_000);
        }
    }

    @Test
    void anUpstreamWhoseCertificateIsNotTrustedGives502NamingWhy() throws Exception {
        try (Gateway gateway = Gateway.start(live, URI.create("https://localhost:" + upstream.port()), "127.0.0.1", 0,
                5_000)) {
            HttpResponse<String> answer;
            try (dev.sluice.testkit.LogCapture log = dev.sluice.testkit.LogCapture.of("sluice")) {
                answer = get(gateway, "/elsewhere");
                assertThat(log.messages()).anySatisfy(line -> assertThat(line)
                        .startsWith("gateway: the upstream failed, answered 502: ").contains("certification path"));
            }
            assertThat(answer.statusCode()).isEqualTo(502);
            assertThat(JSON.readTree(answer.body()).get("error").asText()).isEqualTo("bad gateway: the upstream failed");
        }
    }

    @Test
    void anUpstreamWhoseCertificateNamesAnotherHostGives502() throws Exception {
        int before = upstream.requests.get();
        try (Gateway gateway = Gateway.start(live, URI.create("https://127.0.0.1:" + upstream.port()), "127.0.0.1", 0,
                5_000, SslContextBuilder.forClient().trustManager(certificate).build())) {
            HttpResponse<String> answer;
            try (dev.sluice.testkit.LogCapture log = dev.sluice.testkit.LogCapture.of("sluice")) {
                answer = get(gateway, "/elsewhere");
                assertThat(log.messages()).anySatisfy(line -> assertThat(line)
                        .startsWith("gateway: the upstream failed, answered 502: ").contains("127.0.0.1"));
            }
            assertThat(answer.statusCode()).isEqualTo(502);
            assertThat(JSON.readTree(answer.body()).get("error").asText()).isEqualTo("bad gateway: the upstream failed");
        }
        assertThat(upstream.requests.get()).as("no request was sent").isEqualTo(before);
    }
}
