package dev.sluice.server.request;

/** A request that cannot be decided as it stands (a cost header that is not a number): answered 400, never charged. */
public final class BadRequest extends RuntimeException {
    public BadRequest(String message) {
        super(message, null, false, false);
    }
}
