package dev.sluice.redis;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads RESP2 answers: a simple or bulk string (a bulk string one char per byte, ISO-8859-1, as
 * {@link ReplyCodec} reads values), an error ({@link Error}), an integer ({@link Long}), nil ({@code null}) or
 * an array ({@link List}).
 */
final class RespReader {
    /** An error answer: {@code -ERR ...}, its text. */
    record Error(String message) {
    }

    private final InputStream in;
    private final byte[] buffer = new byte[1 << 14];
    private int at;
    private int end;

    RespReader(InputStream in) {
        this.in = in;
    }

    Object read() throws IOException {
        int type = next();
        switch (type) {
            case '+':
                return line();
            case '-':
                return new Error(line());
            case ':':
                return number(line());
            case '$': {
                long length = number(line());
                if (length < 0) {
                    return null;
                }
                if (length > Integer.MAX_VALUE - 2) {
                    throw new IOException("a string of " + length + " bytes");
                }
                byte[] value = new byte[(int) length];
                fill(value);
                if (next() != '\r' || next() != '\n') {
                    throw new IOException("a string not ended by CRLF");
                }
                return new String(value, StandardCharsets.ISO_8859_1);
            }
            case '*': {
                long count = number(line());
                if (count < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>();
                for (long i = 0; i < count; i++) {
                    items.add(read());
                }
                return items;
            }
            default:
                throw new IOException("not RESP: a reply starting with byte " + type);
        }
    }

    private long number(String text) throws IOException {
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IOException("not RESP: \"" + text + "\" where a number belongs");
        }
    }

    private String line() throws IOException {
        StringBuilder text = new StringBuilder();
        while (true) {
            int b = next();
            if (b == '\r') {
                if (next() != '\n') {
                    throw new IOException("not RESP: CR without LF");
                }
                return text.toString();
            }
            text.append((char) b);
        }
    }

    private void fill(byte[] value) throws IOException {
        int filled = 0;
        while (filled < value.length) {
            if (at == end) {
                refill();
            }
            int n = Math.min(end - at, value.length - filled);
            System.arraycopy(buffer, at, value, filled, n);
            at += n;
            filled += n;
        }
    }

    private int next() throws IOException {
        if (at == end) {
            refill();
        }
        return buffer[at++] & 0xff;
    }

    private void refill() throws IOException {
        int n = in.read(buffer);
        if (n < 0) {
            throw new IOException("Redis closed the connection");
        }
        at = 0;
        end = n;
    }
}
