package dev.sluice.server.config;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * SHA-256 in hex: what tells two secrets apart without holding them (a password's fingerprint, a trust file's), masks
 * a key on the dashboard, and stands for a key too long to keep. Every JVM has SHA-256, so its absence is no error a
 * caller could handle.
 */
public final class Sha256 {
    private Sha256() {
    }

    public static String hex(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    /** The digest of {@code text}'s UTF-8. */
    public static String hex(String text) {
        return hex(text.getBytes(StandardCharsets.UTF_8));
    }
}
