package dev.sluice.redis;

import io.netty.util.Timeout;
import io.netty.util.Timer;

import java.io.IOException;
import java.net.Socket;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A bound on the whole of an exchange over a socket, not on each read: the socket is closed once the time is up.
 * A timeout on each read lets a server that sends a byte a second hold an exchange as long as it likes (a review
 * held a TLS handshake so, and a Sentinel's answer).
 */
final class SocketDeadline implements AutoCloseable {
    private final AtomicBoolean passed = new AtomicBoolean();
    private final Timeout timeout;

    SocketDeadline(Socket socket, int timeoutMs, Timer timer) {
        this.timeout = timer.newTimeout(due -> {
            passed.set(true);
            socket.close();
        }, timeoutMs, TimeUnit.MILLISECONDS);
    }

    /**
     * Ends the watch once the exchange is over.
     *
     * @throws IOException if the time was up as it ended: its socket is closed
     */
    void met() throws IOException {
        if (!timeout.cancel() && passed.get()) {
            throw new IOException("socket closed");
        }
    }

    /** {@code failure}, or what it stands for once the time was up: {@code late}. */
    IOException explain(IOException failure, String late) {
        return passed.get() ? new IOException(late) : failure;
    }

    @Override
    public void close() {
        timeout.cancel();
    }
}
