package dev.sluice.testkit.redis;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A certificate and its key, in PEM files, for a Redis that speaks TLS in tests: made by the JDK's own
 * {@code keytool} (no library, no openssl on the machine), for the names given, such as {@code ip:127.0.0.1} or
 * {@code dns:localhost}. The certificate signs itself, so a client trusts it by trusting the certificate file.
 */
public record SelfSignedCertificate(Path certificate, Path key) {
    private static final String PASSWORD = "sluice-test";

    /**
     * Makes one in {@code dir} for {@code names} (subject alternative names, as keytool writes them).
     *
     * @throws IOException if keytool fails, with its output
     */
    public static SelfSignedCertificate make(Path dir, String... names) throws IOException, InterruptedException {
        Path store = dir.resolve("server.p12");
        Files.deleteIfExists(store);
        Path keytool = Path.of(System.getProperty("java.home"), "bin", "keytool");
        Process process = new ProcessBuilder(List.of(keytool.toString(), "-genkeypair", "-alias", "redis", "-keyalg",
                "EC", "-groupname", "secp256r1", "-validity", "2", "-dname", "CN=sluice-test", "-ext",
                "SAN=" + String.join(",", names), "-keystore", store.toString(), "-storetype", "PKCS12", "-storepass",
                PASSWORD, "-keypass", PASSWORD)).redirectErrorStream(true)
                .redirectOutput(dir.resolve("keytool.log").toFile()).start();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IOException("keytool did not end within 60 s");
        }
        if (process.exitValue() != 0) {
            throw new IOException("keytool failed: " + Files.readString(dir.resolve("keytool.log")));
        }
        try (InputStream in = Files.newInputStream(store)) {
            KeyStore keys = KeyStore.getInstance("PKCS12");
            keys.load(in, PASSWORD.toCharArray());
            Key key = keys.getKey("redis", PASSWORD.toCharArray());
            Path certificate = Files.writeString(dir.resolve("server.crt"),
                    pem("CERTIFICATE", keys.getCertificate("redis").getEncoded()));
            Path keyFile = Files.writeString(dir.resolve("server.key"), pem("PRIVATE KEY", key.getEncoded()));
            return new SelfSignedCertificate(certificate, keyFile);
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot read the certificate keytool made: " + e.getMessage(), e);
        }
    }

    private static String pem(String type, byte[] der) {
        return "-----BEGIN " + type + "-----\n"
                + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
                + "\n-----END " + type + "-----\n";
    }
}
