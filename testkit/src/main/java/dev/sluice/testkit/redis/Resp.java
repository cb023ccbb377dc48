package dev.sluice.testkit.redis;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A minimal RESP2 connection: enough to bring fixtures up (PING, CLUSTER ...) and for tests to look at what a
 * store left in Redis (TTL, MEMORY USAGE, INFO). Not a client for the store itself: that is Lettuce and the
 * store's own script connections, in sluice-redis.
 */
public final class Resp implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    public Resp(String host, int port, int timeoutMillis) throws IOException {
        socket = new Socket();
        socket.connect(new InetSocketAddress(host, port), timeoutMillis);
        socket.setSoTimeout(timeoutMillis);
        in = new BufferedInputStream(socket.getInputStream());
        out = socket.getOutputStream();
    }

    /**
     * Sends one command and returns its reply: a {@code String} (simple or bulk), a {@code Long}, a
     * {@code List} of replies, or {@code null}.
     *
     * @throws RespError for an error reply
     */
    public Object call(String... command) throws IOException {
        ByteArrayOutputStream request = new ByteArrayOutputStream();
        request.writeBytes(("*" + command.length + "\r\n").getBytes(StandardCharsets.UTF_8));
        for (String part : command) {
            byte[] bytes = part.getBytes(StandardCharsets.UTF_8);
            request.writeBytes(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.UTF_8));
            request.writeBytes(bytes);
            request.writeBytes("\r\n".getBytes(StandardCharsets.UTF_8));
        }
        out.write(request.toByteArray());
        out.flush();
        return read();
    }

    private Object read() throws IOException {
        int type = in.read();
        String line = line();
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new RespError(line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int length = Integer.parseInt(line);
                if (length < 0) {
                    return null;
                }
                byte[] bytes = in.readNBytes(length + 2);
                return new String(bytes, 0, length, StandardCharsets.UTF_8);
            }
            case '*': {
                int count = Integer.parseInt(line);
                if (count < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    items.add(read());
                }
                return items;
            }
            default:
                throw new IOException("not a RESP reply: type byte " + type);
        }
    }

    private String line() throws IOException {
        StringBuilder line = new StringBuilder();
        for (int c = in.read(); c != '\r'; c = in.read()) {
            if (c < 0) {
                throw new IOException("connection closed by Redis");
            }
            line.append((char) c);
        }
        in.read(); // \n
        return line.toString();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }

    /** An error reply from Redis. */
    public static final class RespError extends IOException {
        private static final long serialVersionUID = 1L;

        RespError(String message) {
            super(message);
        }
    }
}
