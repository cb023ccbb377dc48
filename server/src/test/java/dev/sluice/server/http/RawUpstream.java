package dev.sluice.server.http;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An upstream that writes its answers byte by byte, for what no HTTP server of the JDK sends (an answer ended by its
 * connection's close, a 1xx before the answer, a connection closed as a request arrives, a body never read). Each
 * connection goes to the handler on a thread of its own; the handler closes it or leaves it open, and closing the
 * upstream closes every connection it accepted.
 */
final class RawUpstream implements AutoCloseable {
    /** What the upstream does with one connection. */
    @FunctionalInterface
    interface Handler {
        void handle(Socket connection) throws IOException;
    }

    private final ServerSocket socket;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();

    RawUpstream(Handler handler) throws IOException {
        socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        daemon(() -> {
            try {
                while (true) {
                    Socket connection = socket.accept();
                    accepted.add(connection);
                    daemon(() -> {
                        try {
                            handler.handle(connection);
                        } catch (IOException e) {
                            // the gateway went away
                        }
                    });
                }
            } catch (IOException closed) {
                // the test is over
            }
        });
    }

    private static void daemon(Runnable task) {
        Thread thread = new Thread(task);
        thread.setDaemon(true);
        thread.start();
    }

    String uri() {
        return "http://127.0.0.1:" + socket.getLocalPort();
    }

    /** A reader of what a connection (or a client's) receives, one char per byte. */
    static BufferedReader reader(Socket connection) throws IOException {
        return new BufferedReader(new InputStreamReader(connection.getInputStream(), StandardCharsets.ISO_8859_1));
    }

    /**
     * Reads a message's head past its blank line, each line into {@code lines} if given; its Content-Length (0 if it
     * has none), or -1 at the end of the stream.
     */
    static int readHead(BufferedReader in, StringBuilder lines) throws IOException {
        int length = 0;
        String line = in.readLine();
        if (line == null) {
            return -1;
        }
        for (; line != null && !line.isEmpty(); line = in.readLine()) {
            if (lines != null) {
                lines.append(line).append("\r\n");
            }
            if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
                length = Integer.parseInt(line.substring("content-length:".length()).trim());
            }
        }
        return length;
    }

    static void write(Socket connection, String text) throws IOException {
        connection.getOutputStream().write(text.getBytes(StandardCharsets.ISO_8859_1));
    }

    @Override
    public void close() throws IOException {
        socket.close();
        for (Socket connection : accepted) {
            connection.close();
        }
    }
}
