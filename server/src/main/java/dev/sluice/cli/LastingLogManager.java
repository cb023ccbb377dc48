package dev.sluice.cli;

import java.util.logging.LogManager;

/**
 * The JDK's log manager, but for one thing: its handlers are not closed by its own shutdown hook, which runs in no
 * order with the server's, and so closed them while the server was still serving ({@code --stop-delay}) and draining:
 * what it logged then (a rejection, a reload refused, an upstream's failure) went nowhere (a review). The server closes
 * them itself once it has stopped ({@link #closeAll}).
 */
public final class LastingLogManager extends LogManager {
    /** The name of the JDK's shutdown hook that resets the log manager. */
    private static final String JDK_CLEANER = LogManager.class.getName() + "$Cleaner";

    @Override
    public void reset() {
        if (Thread.currentThread().getClass().getName().equals(JDK_CLEANER)) {
            return; // the process is ending: closeAll closes the handlers, last
        }
        super.reset();
    }

    /** Closes every handler, once nothing is left to log: the end of the process. */
    static void closeAll() {
        if (LogManager.getLogManager() instanceof LastingLogManager lasting) {
            lasting.resetNow();
        }
    }

    private void resetNow() {
        super.reset();
    }
}
