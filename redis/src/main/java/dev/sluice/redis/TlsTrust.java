package dev.sluice.redis;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.util.Collection;

/**
 * Whom a {@code rediss://} store trusts: the certificates of a PEM file (a private CA's, a self-signed server's), or
 * the JVM's trust store, which holds the public CAs that managed Redis services sign with. One trust serves both
 * kinds of connection: the store's own sockets ({@link #sockets}) and Lettuce's for a Cluster ({@link #managers}).
 */
record TlsTrust(TrustManagerFactory managers) {

    /**
     * The certificates of {@code pem}, or the JVM's own trust when it is null.
     *
     * @throws IllegalArgumentException naming the file, when it cannot be read or holds no certificate
     */
    static TlsTrust of(Path pem) {
        try {
            TrustManagerFactory managers = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            if (pem == null) {
                managers.init((KeyStore) null);
                return new TlsTrust(managers);
            }
            Collection<? extends Certificate> certificates;
            try (InputStream in = Files.newInputStream(pem)) {
                certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
            } catch (IOException e) {
                throw new IllegalArgumentException(pem + ": cannot read the certificates to trust: " + e.getMessage(), e);
            } catch (CertificateException e) {
                throw new IllegalArgumentException(pem + ": not PEM certificates: " + e.getMessage(), e);
            }
            if (certificates.isEmpty()) {
                throw new IllegalArgumentException(pem + ": holds no certificate (expected PEM, -----BEGIN CERTIFICATE-----)");
            }
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (Certificate certificate : certificates) {
                store.setCertificateEntry("trusted-" + i++, certificate);
            }
            managers.init(store);
            return new TlsTrust(managers);
        } catch (GeneralSecurityException | IOException e) {
            throw new IllegalStateException("cannot set up TLS trust: " + e.getMessage(), e);
        }
    }

    /**
     * Why a TLS handshake failed, said whole and in words of TLS, from the deepest reason in {@code failure}; null if
     * it was no handshake's. A caller that shows only an exception's root cause (the server does) would otherwise say
     * "unable to find valid certification path to requested target", and no word of TLS.
     */
    static String refusal(Throwable failure) {
        return refusal(failure, false, 0);
    }

    /**
     * Down the causes, and the suppressed failures of each (Lettuce's "Unable to establish a connection to Redis
     * Cluster" holds each node's failure as a suppressed one of its cause): the deepest of a chain with a TLS failure.
     */
    private static String refusal(Throwable at, boolean handshake, int depth) {
        if (at == null || depth > 32) {
            return null;
        }
        boolean tls = handshake || at instanceof javax.net.ssl.SSLException;
        Throwable cause = at.getCause() == at ? null : at.getCause();
        if (cause == null && tls) {
            return "TLS handshake failed: " + (at instanceof java.security.cert.CertPathBuilderException
                    ? "its certificate is signed by none of the certificates trusted (give them with trust, or"
                    + " store_trust)" : at instanceof java.security.cert.CertificateExpiredException
                    ? "its certificate has expired (" + at.getMessage() + ")" : String.valueOf(at.getMessage()));
        }
        String found = refusal(cause, tls, depth + 1);
        for (int i = 0; found == null && i < at.getSuppressed().length; i++) {
            found = refusal(at.getSuppressed()[i], false, depth + 1);
        }
        return found;
    }

    /** The sockets of a standalone store's own connections. */
    SSLSocketFactory sockets() {
        try {
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, managers.getTrustManagers(), null);
            return context.getSocketFactory();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("cannot set up TLS: " + e.getMessage(), e);
        }
    }
}
