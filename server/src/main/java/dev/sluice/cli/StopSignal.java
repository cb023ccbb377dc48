package dev.sluice.cli;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A command asked to stop while it runs ({@code SIGINT} from a Ctrl-C, {@code SIGTERM}): it is {@linkplain #asked told},
 * and the process waits for it to clean up after itself, until it is {@linkplain #close closed} or for
 * {@code graceMs}, before it ends; then {@code lastResort} runs. A JVM asked to stop ends once its shutdown hooks have,
 * whatever its other threads are doing: without one, a {@code simulate} stopped left its held decisions and its keys
 * on Redis behind (a review found 13 MB in the temporary directory, and thousands of keys for 52 days).
 */
final class StopSignal implements AutoCloseable {
    private final CountDownLatch cleaned = new CountDownLatch(1);
    private final Thread hook;
    private volatile boolean asked;

    private StopSignal(long graceMs, Runnable lastResort) {
        hook = new Thread(() -> {
            asked = true;
            try {
                cleaned.await(graceMs, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            lastResort.run(); // a command stuck (on Redis, on its input) past the grace: this much, at least
        }, "sluice-stop");
    }

    /** Watches for the process being asked to stop, from now until {@link #close}. */
    static StopSignal watch(long graceMs, Runnable lastResort) {
        StopSignal signal = new StopSignal(graceMs, lastResort);
        Runtime.getRuntime().addShutdownHook(signal.hook);
        return signal;
    }

    /** Whether the process has been asked to stop: the command is to end, cleaning up, at its next chance. */
    boolean asked() {
        return asked;
    }

    /** The command has cleaned up: the process may end, if it is ending. */
    @Override
    public void close() {
        cleaned.countDown();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException stopping) {
            // the hook runs: it has been told
        }
    }
}
