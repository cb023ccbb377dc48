package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/** Keys chosen to collide: the table turns to a hash with a secret, and stays exact through it. */
class KeyTableCollisionTest {
    private static final long T0 = 1_700_006_400L * 1_000_000_000L;
    private static final Rule TWO_AN_HOUR = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("2/1h")));

    /** The 2^n keys made of n blocks of "Aa" or "BB" after a prefix: one {@link String#hashCode} for them all. */
    static List<String> sharingOneHash(int blocks) {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 1 << blocks; i++) {
            StringBuilder key = new StringBuilder("api-key:");
            for (int b = 0; b < blocks; b++) {
                key.append((i >> b & 1) == 0 ? "Aa" : "BB");
            }
            keys.add(key.toString());
        }
        return keys;
    }

    /**
     * Found by trying it: 32,768 keys of one hash took 4.2 s to put in, each walking past all the others, and
     * 32,768 ordinary keys after them 3.1 s, walking the same run. Now the ninth key of one hash makes the table
     * hash with a secret, and every key is still decided on its own count, through that copy and later resizes
     * (keys stored as bytes and keys that are not Latin-1 alike).
     */
    @Test
    void keysSharingAHashMakeTheTableHashWithASecretAndEachKeepsItsCount() {
        List<String> keys = sharingOneHash(12);
        assertThat(keys.stream().map(String::hashCode).distinct()).hasSize(1);
        KeyTable table = new KeyTable(1_000_000);
        for (int i = 0; i < 8; i++) {
            table.decide(TWO_AN_HOUR, keys.get(i), 1, null, T0, 0);
        }
        assertThat(table.seeded()).as("eight keys of one hash are chance").isFalse();
        for (String key : keys) {
            table.decide(TWO_AN_HOUR, key, 1, null, T0, 0);
        }
        assertThat(table.seeded()).isTrue();
        for (int i = 0; i < 50_000; i++) { // resizes of a seeded table
            table.decide(TWO_AN_HOUR, i % 3 == 0 ? "ключ-" + i : "user-" + i, 1, null, T0, 0);
        }
        assertThat(table.seeded()).as("once seeded, always").isTrue();
        for (String key : keys) {
            assertThat(table.decide(TWO_AN_HOUR, key, 1, null, T0, 0).remaining()).as(key).isZero();
        }
        for (int i = 0; i < 50_000; i++) {
            String key = i % 3 == 0 ? "ключ-" + i : "user-" + i;
            assertThat(table.decide(TWO_AN_HOUR, key, 1, null, T0, 0).remaining()).as(key).isZero();
        }
        assertThat(table.size()).isEqualTo(keys.size() + 50_000);
        table.remove(keys.get(7));
        assertThat(table.decide(TWO_AN_HOUR, keys.get(7), 0, null, T0, 0).remaining()).as("removed").isEqualTo(2);
    }

    /**
     * A key removed and decided again leaves a tombstone with its hash at each turn (a reset, a key back to
     * untouched, an eviction): those are no keys of its hash (a bug caught in review, before it landed: ten
     * resets of one key seeded the table).
     */
    @Test
    void aKeyRemovedAndDecidedAgainIsNoCollision() {
        KeyTable table = new KeyTable(1_000);
        for (int i = 0; i < 50; i++) {
            table.decide(TWO_AN_HOUR, "login:alice", 1, null, T0, 0);
            table.remove("login:alice");
        }
        assertThat(table.seeded()).isFalse();
    }

    /** Keys named in sequence, as users and addresses are, never make the table pay for the seeded hash. */
    @Test
    void keysNamedInSequenceKeepThePlainHash() {
        KeyTable table = new KeyTable(1_000_000);
        for (int i = 0; i < 300_000; i++) {
            table.decide(TWO_AN_HOUR, "user-" + i, 1, null, T0, 0);
            table.decide(TWO_AN_HOUR, "10." + (i >> 16) + "." + (i >> 8 & 255) + "." + (i & 255), 1, null, T0, 0);
        }
        assertThat(table.seeded()).isFalse();
    }

    /** The seeded hash is the polynomial it says, modulo 2^61 − 1, whatever the seed and characters. */
    @Test
    void theSeededHashIsThePolynomialModuloTheMersennePrime() {
        BigInteger prime = BigInteger.ONE.shiftLeft(61).subtract(BigInteger.ONE);
        Random random = new Random(61);
        for (int round = 0; round < 2_000; round++) {
            long seed = (random.nextLong() >>> 3) % prime.longValue();
            if (round % 100 == 0) {
                seed = prime.longValue() - 1 - round / 100; // the largest seeds: the most carries
            }
            StringBuilder key = new StringBuilder();
            for (int i = random.nextInt(40); i > 0; i--) {
                key.append((char) (round % 3 == 0 ? 0xFFFF - random.nextInt(3) : random.nextInt(0x3000)));
            }
            BigInteger h = BigInteger.ZERO;
            for (int i = 0; i < key.length(); i++) {
                h = h.multiply(BigInteger.valueOf(seed)).add(BigInteger.valueOf(key.charAt(i) + 1)).mod(prime);
            }
            long expected = h.longValue();
            long mixed = (expected ^ (expected >>> 29)) * 0xBF58476D1CE4E5B9L;
            int hash = (int) (mixed ^ (mixed >>> 32));
            assertThat(StoredKeys.seeded(key.toString(), seed)).as("round %d", round).isEqualTo(hash == 0 ? 1 : hash);
        }
    }
}
