package dev.sluice.redis;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A command as RESP, an array of bulk strings, built in one buffer so that it leaves in one write. Keys and
 * arguments go as UTF-8, as Lettuce's string codec sends them ({@link ReplyCodec}).
 */
final class RespWriter {
    /** Past this many bytes a buffer is not kept for the next command. */
    static final int KEPT = 1 << 16;
    private byte[] bytes = new byte[1024];
    private int size;

    void command(String[] head, String[] keys, String[] arguments) {
        size = 0;
        int count = head.length + (keys == null ? 0 : keys.length) + (arguments == null ? 0 : arguments.length);
        header('*', count);
        for (String part : head) {
            bulk(part);
        }
        if (keys != null) {
            for (String key : keys) {
                bulk(key);
            }
        }
        if (arguments != null) {
            for (String argument : arguments) {
                bulk(argument);
            }
        }
    }

    int capacity() {
        return bytes.length;
    }

    void writeTo(OutputStream out) throws IOException {
        out.write(bytes, 0, size);
    }

    private void bulk(String value) {
        int length = value.length();
        boolean ascii = true;
        for (int i = 0; i < length && ascii; i++) {
            ascii = value.charAt(i) < 0x80;
        }
        if (ascii) {
            header('$', length);
            room(length + 2);
            for (int i = 0; i < length; i++) {
                bytes[size++] = (byte) value.charAt(i);
            }
        } else {
            byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
            header('$', utf8.length);
            room(utf8.length + 2);
            System.arraycopy(utf8, 0, bytes, size, utf8.length);
            size += utf8.length;
        }
        bytes[size++] = '\r';
        bytes[size++] = '\n';
    }

    private void header(char type, int count) {
        room(13);
        bytes[size++] = (byte) type;
        String digits = Integer.toString(count);
        for (int i = 0; i < digits.length(); i++) {
            bytes[size++] = (byte) digits.charAt(i);
        }
        bytes[size++] = '\r';
        bytes[size++] = '\n';
    }

    private void room(int more) {
        if (size + more > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
        }
    }
}
