package dev.sluice.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP proxy in front of a Redis that can fall silent as a vanished host does: {@link #silence()} makes the
 * connections made so far forward nothing more either way, and send no reset or close either, while the
 * connections made after it forward as before (a Redis reached again, say through a failed-over address).
 */
final class SilencingProxy implements AutoCloseable {
    private final ServerSocket listening;
    private final int target;
    /** Each pair, as the connections a silence ends the forwarding of. */
    private final List<Pair> pairs = new CopyOnWriteArrayList<>();

    private static final class Pair {
        final Socket client;
        final Socket server;
        volatile boolean silent;

        Pair(Socket client, Socket server) {
            this.client = client;
            this.server = server;
        }
    }

    SilencingProxy(int targetPort) throws IOException {
        this.target = targetPort;
        this.listening = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread accepting = new Thread(this::accept, "silencing-proxy-" + listening.getLocalPort());
        accepting.setDaemon(true);
        accepting.start();
    }

    String uri() {
        return "redis://127.0.0.1:" + listening.getLocalPort();
    }

    /** From now on the connections made so far forward nothing, and stay open. */
    void silence() {
        for (Pair pair : pairs) {
            pair.silent = true;
        }
    }

    private void accept() {
        while (!listening.isClosed()) {
            try {
                Socket client = listening.accept();
                Socket server = new Socket(InetAddress.getLoopbackAddress(), target);
                Pair pair = new Pair(client, server);
                pairs.add(pair);
                pump(pair, client.getInputStream(), server.getOutputStream());
                pump(pair, server.getInputStream(), client.getOutputStream());
            } catch (IOException e) {
                // closing, or Redis refused: the client sees its connection end
            }
        }
    }

    private static void pump(Pair pair, InputStream from, OutputStream to) {
        Thread pumping = new Thread(() -> {
            byte[] buffer = new byte[8192];
            try {
                for (int n; (n = from.read(buffer)) >= 0; ) {
                    if (!pair.silent) { // silent: read and dropped, so that neither side's writes ever block
                        to.write(buffer, 0, n);
                        to.flush();
                    }
                }
            } catch (IOException e) {
                // one side closed
            }
            if (!pair.silent) {
                closeQuietly(pair.client);
                closeQuietly(pair.server);
            }
        }, "silencing-proxy-pump");
        pumping.setDaemon(true);
        pumping.start();
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // closing anyway
        }
    }

    @Override
    public void close() throws IOException {
        listening.close();
        for (Pair pair : pairs) {
            closeQuietly(pair.client);
            closeQuietly(pair.server);
        }
    }
}
