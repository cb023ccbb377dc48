package dev.sluice.server.request;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * UTF-8 read strictly, for what a client sends (a path's escapes, a header, the API's bodies) and the files an operator
 * writes: here, in the request layer, since the configuration reads requests' parts and not the other way round.
 */
public final class StrictUtf8 {
    private StrictUtf8() {
    }

    /**
     * Where {@code bytes} stop being UTF-8 (the index of the first byte that is not), or -1. Strict, as the JDK's
     * decoder is and a lenient one is not: an overlong form ({@code C0 AF} for {@code /}), an encoded surrogate or
     * a code point past U+10FFFF is not UTF-8 (Jackson reads each as a character: a bug found by trying the API).
     */
    public static int firstBadByte(byte[] bytes) {
        boolean ascii = true;
        for (byte b : bytes) {
            ascii &= b >= 0;
        }
        if (ascii) {
            return -1; // nearly every body of the API: no decoder made
        }
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        CoderResult result = decoder.decode(in, CharBuffer.allocate(bytes.length), true);
        return result.isError() ? in.position() : -1;
    }
}
