package dev.sluice.cli;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The lines of a trace, read as bytes and decoded one at a time, strictly: a line that is not UTF-8 is refused by
 * its number (decoded leniently, two different keys would become the same U+FFFD one and share a limit), and a
 * line that never ends ({@code /dev/zero}) stops at {@link #MAX_LINE} instead of filling the heap. A trace may
 * come from a pipe, so its length is not bounded, only its lines'.
 */
final class TraceLines {
    /** The longest line read: a trace line is a time, a key and a cost. */
    static final int MAX_LINE = 1 << 20;

    private final String name;
    private final InputStream in;
    private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
    private final ByteArrayOutputStream line = new ByteArrayOutputStream(128);
    private int number;

    /** {@code in} should be buffered: it is read a byte at a time. */
    TraceLines(String name, InputStream in) {
        this.name = name;
        this.in = in;
    }

    /** The number of the line {@link #next} returned last, from 1. */
    int number() {
        return number;
    }

    /** The next line without its end ({@code \n} or {@code \r\n}), or null at the end of the trace. */
    String next() throws IOException, BadInput {
        line.reset();
        int b = in.read();
        if (b < 0) {
            return null;
        }
        number++;
        while (b >= 0 && b != '\n') {
            if (line.size() == MAX_LINE) {
                throw new BadInput(name + ":" + number + ": a line longer than " + (MAX_LINE >> 20)
                        + " MiB; a trace line is t_ms,key,cost");
            }
            line.write(b);
            b = in.read();
        }
        byte[] bytes = line.toByteArray();
        int length = bytes.length > 0 && bytes[bytes.length - 1] == '\r' ? bytes.length - 1 : bytes.length;
        try {
            return decoder.decode(ByteBuffer.wrap(bytes, 0, length)).toString();
        } catch (CharacterCodingException e) {
            throw new BadInput(name + ":" + number + ": not valid UTF-8");
        }
    }
}
