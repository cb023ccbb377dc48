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

    private final ConcurrentHashMap<String, Held> held = new ConcurrentHashMap<>();
    private final SecureRandom random = new SecureRandom();

    /** The id of the place {@code checked} holds, or {@code null} when it holds none. */
    String hold(Checked checked) {
        Permit permit = checked.permit();
        if (permit == null || !permit.granted()) {
            return null;
        }
        byte[] bits = new byte[16];
        random.nextBytes(bits);
        String id = HexFormat.of().formatHex(bits);
        held.put(id, new Held(permit, System.nanoTime() + checked.policy().inFlight().periodNanos()));
        return id;
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
