package dev.sluice.redis;

import dev.sluice.testkit.redis.SelfSignedCertificate;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;

/** A self-signed certificate in a temporary directory of its own, which closing deletes with all it holds. */
record TemporaryCertificate(Path dir, SelfSignedCertificate certificate) implements AutoCloseable {

    /** One for {@code names} (subject alternative names, as keytool writes them: {@code ip:127.0.0.1}). */
    static TemporaryCertificate make(String... names) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("sluice-tls-");
        try {
            return new TemporaryCertificate(dir, SelfSignedCertificate.make(dir, names));
        } catch (IOException | InterruptedException | RuntimeException e) {
            delete(dir);
            throw e;
        }
    }

    /** The certificate file, which a client trusts. */
    Path trusted() {
        return certificate.certificate();
    }

    @Override
    public void close() throws IOException {
        delete(dir);
    }

    private static void delete(Path dir) throws IOException {
        List<Path> files;
        try (var walk = Files.walk(dir)) {
            files = walk.sorted(Comparator.reverseOrder()).toList();
        }
        for (Path file : files) {
            Files.deleteIfExists(file);
        }
    }
}
