package dev.sluice.server.http;

import dev.sluice.Permit;
import dev.sluice.server.Checked;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The places of concurrency policies taken through the HTTP API, by the id the client was given. The gateway
 * gives a place back when its answer has been sent; a client of {@code /v1/check} or {@code /v1/check-request}
 * is answered a {@code permit} with the place and gives it back with {@code POST /v1/release} when its work
 * is done, or lets the lease run out. Ids are 128 random bits, so no client can give back another's place by
 * guessing. An id is forgotten once its place is given back or its lease has run out (those are swept out
 * every second by the server).
 */
final class HeldPlaces {
    private record Held(Permit permit, long expiresAt) {
    }

    /** How many lowercase hex digits an id has: 128 bits. */
    static final int ID_DIGITS = 32;

    private final ConcurrentHashMap<String, Held> held = new ConcurrentHashMap<>();
    private final SecureRandom random = new SecureRandom();

    /** The id of the place {@code checked} holds, or {@code null} when it holds none. */
    String hold(Checked checked) {
        Permit permit = checked.permit();
        if (permit == null || !permit.granted()) {
            return null;
        }
        byte[] bits = new byte[ID_DIGITS / 2];
        random.nextBytes(bits);
        String id = HexFormat.of().formatHex(bits);
        held.put(id, new Held(permit, System.nanoTime() + checked.policy().inFlight().periodNanos()));
        return id;
    }

    /** Whether {@code text} has the form of an id this class hands out, so that a typo is told apart from a lease run out. */
    static boolean isId(String text) {
        if (text.length() != ID_DIGITS) {
            return false;
        }
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
                return false;
            }
        }
        return true;
    }

    /** Gives back the place held under {@code id}; false when there is none (given back, or its lease ran out). */
    boolean release(String id) {
        Held place = held.remove(id);
        if (place == null || System.nanoTime() - place.expiresAt() >= 0) {
            return false;
        }
        place.permit().close();
        return true;
    }

    /** Forgets the places whose lease has run out by {@code now} ({@link System#nanoTime()}). */
    void dropExpired(long now) {
        held.values().removeIf(place -> now - place.expiresAt() >= 0);
    }
}
