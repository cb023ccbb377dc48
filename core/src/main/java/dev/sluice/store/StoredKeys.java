package dev.sluice.store;

/**
 * How {@link KeyTable} stores and hashes a key, apart from any table: a key kept as its Latin-1 bytes when it has no
 * other characters ({@link #compact}), compared without building a string ({@link #matches}); its plain hash,
 * {@link String#hashCode()} spread so that keys named in sequence scatter ({@link #hashOf(String)}); and the seeded
 * hash a table turns to when keys are chosen to collide ({@link #seeded(String, long)}, KeyTable's "Keys chosen to
 * collide"). A stored key hashes as the string it stands for, so a table copied to new slots needs no strings.
 */
final class StoredKeys {
    private StoredKeys() {
    }

    static final int NO_HASH = 0;

    /** The Mersenne prime 2^61 − 1: the seeded hash is a polynomial in a key's characters modulo it. */
    static final long PRIME = (1L << 61) - 1;

    /**
     * The seeded hash of {@code key}: the polynomial whose coefficients are its characters (plus one, so that
     * keys of different lengths differ), at the point {@code seed}, modulo {@link #PRIME}, mixed down to 32 bits.
     * The polynomials of two different keys of at most L characters agree for at most L of the 2^61 seeds (the
     * 32 bits kept add the collisions of chance, about one seed in 2^32), so keys cannot be chosen to collide
     * without the seed.
     */
    static int seeded(String key, long seed) {
        long h = 0;
        for (int i = 0; i < key.length(); i++) {
            h = step(h, seed, key.charAt(i));
        }
        return finish(h);
    }

    /** {@link #seeded(String, long)} of a stored key. */
    static int seeded(Object stored, long seed) {
        if (stored instanceof byte[] bytes) {
            long h = 0;
            for (byte b : bytes) {
                h = step(h, seed, b & 0xFF);
            }
            return finish(h);
        }
        return seeded((String) stored, seed);
    }

    /** {@code h × seed + c + 1} modulo {@link #PRIME}, for {@code h} and {@code seed} below it. */
    private static long step(long h, long seed, int c) {
        long high = Math.multiplyHigh(h, seed); // the product is high × 2^64 + low, and 2^64 ≡ 8
        long low = h * seed;
        long r = (low & PRIME) + (low >>> 61) + (high << 3);
        r = (r & PRIME) + (r >>> 61) + c + 1;
        return r >= PRIME ? r - PRIME : r;
    }

    private static int finish(long h) {
        long mixed = (h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L;
        int hash = (int) (mixed ^ (mixed >>> 32));
        return hash == NO_HASH ? 1 : hash;
    }

    /**
     * The key's plain hash: {@link String#hashCode()} with its high bits folded into the low ones, which pick the
     * slot, and multiplied by 2^32 / φ (Fibonacci hashing), so that keys named in sequence scatter instead of
     * filling neighbouring slots; never {@link #NO_HASH}.
     */
    static int hashOf(String key) {
        return spread(key.hashCode());
    }

    private static int spread(int hash) {
        int spread = (hash ^ (hash >>> 16)) * 0x9E3779B9;
        spread ^= spread >>> 16;
        return spread == NO_HASH ? 1 : spread;
    }

    /** The key as stored: its characters as bytes when they are all Latin-1, else the string itself. */
    static Object compact(String key) {
        int length = key.length();
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            char c = key.charAt(i);
            if (c > 0xFF) {
                return key;
            }
            bytes[i] = (byte) c;
        }
        return bytes;
    }

    static boolean matches(Object stored, String key) {
        if (stored instanceof byte[]) {
            byte[] bytes = (byte[]) stored;
            int length = bytes.length;
            if (length != key.length()) {
                return false;
            }
            for (int i = 0; i < length; i++) {
                if ((bytes[i] & 0xFF) != key.charAt(i)) {
                    return false;
                }
            }
            return true;
        }
        return key.equals(stored);
    }

    /** {@link #hashOf(String)} of a stored key. */
    static int hashOf(Object stored) {
        if (stored instanceof byte[]) {
            int hash = 0;
            for (byte b : (byte[]) stored) {
                hash = 31 * hash + (b & 0xFF);
            }
            return spread(hash);
        }
        return hashOf((String) stored);
    }
}
