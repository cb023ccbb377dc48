package dev.sluice.server;

/**
 * A server that stops gracefully when the process is asked to ({@code SIGTERM}): it takes nothing new, and lets what
 * it is handling finish, until a deadline. Closing it afterwards cuts what is left.
 */
public interface Drains {
    /**
     * Takes no new client, and waits for the requests being handled until they are over or {@code deadlineNanos} (on
     * {@link System#nanoTime()}) has come.
     */
    void drain(long deadlineNanos) throws InterruptedException;
}
