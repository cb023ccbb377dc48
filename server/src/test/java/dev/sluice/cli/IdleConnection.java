package dev.sluice.cli;

import java.net.Socket;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** A connection opened to a server and left without a request, as a client that sends nothing would. */
final class IdleConnection {
    private IdleConnection() {
    }

    /**
     * Opens a connection to {@code host:port}, sends nothing, and asserts that the server closes it after an idle
     * timeout of 1 s: between 0.9 and 10 s, give or take the scheduler (1 to 1.25 s expected). The read waits 30 s at
     * most, so a server keeping its default of 60 s fails this.
     */
    static void assertClosedAfterAnIdleSecond(String host, int port) throws Exception {
        try (Socket idle = new Socket(host, port)) {
            idle.setSoTimeout(30_000);
            long opened = System.nanoTime();
            assertThat(idle.getInputStream().read()).as("closed, nothing sent").isEqualTo(-1);
            assertThat(System.nanoTime() - opened).as("closed 1 to 1.25 s after it was made (60 s unless told), give or take")
                    .isBetween(TimeUnit.MILLISECONDS.toNanos(900), TimeUnit.SECONDS.toNanos(10));
        }
    }
}
