package dev.sluice.server.request;

/**
 * A header's text as the client meant it ({@link #asSent}: an HTTP decoder reads bytes one char each), and the parts
 * of headers a policy keys by: the user of {@code Authorization: Basic}, a Host without its port.
 */
public final class HeaderText {
    private HeaderText() {
    }

    /**
     * The user name of {@code authorization} when it is {@code Basic} credentials (the scheme in any case), the text
     * before the first {@code :} of their Base64, read as UTF-8 (RFC 7617), or, when it is not UTF-8, one char a byte
     * (ISO-8859-1, the charset of older clients), so that no two names read the same; else null, as for credentials
     * that are no Base64 of user and password, or of an empty user, which nginx's {@code $remote_user} leaves empty
     * too (a review found names of bytes past UTF-8 read as one, U+FFFD, and an empty user counted as a key).
     */
    public static String basicUser(String authorization) {
        if (authorization == null || authorization.length() < 6
                || !authorization.regionMatches(true, 0, "Basic ", 0, 6)) {
            return null;
        }
        byte[] decoded;
        try {
            decoded = java.util.Base64.getDecoder().decode(authorization.substring(6).strip());
        } catch (IllegalArgumentException notBase64) {
            return null;
        }
        String credentials;
        try {
            credentials = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                    .decode(java.nio.ByteBuffer.wrap(decoded)).toString();
        } catch (java.nio.charset.CharacterCodingException notUtf8) {
            credentials = new String(decoded, java.nio.charset.StandardCharsets.ISO_8859_1);
        }
        int colon = credentials.indexOf(':');
        return colon <= 0 ? null : credentials.substring(0, colon);
    }

    /**
     * A string an HTTP decoder read one char per byte (ISO-8859-1, as Netty reads a request's line and headers), as
     * the client meant it: bytes that are UTF-8 are read as UTF-8, as the JSON of {@code /v1/check-request} carries
     * them, so that a header {@code X-User: é} or a path {@code /é} sent raw is the same key as when it is described
     * (and a message that quotes it shows {@code é}, not {@code Ã©}); bytes that are not UTF-8 are left as read.
     */
    public static String asSent(String read) {
        if (read == null) {
            return null;
        }
        boolean ascii = true;
        for (int i = 0; i < read.length(); i++) {
            char c = read.charAt(i);
            if (c > 0xFF) {
                return read; // not one char per byte: already decoded
            }
            ascii &= c < 0x80;
        }
        if (ascii) {
            return read; // nearly always: nothing to do
        }
        try {
            return java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                    .decode(java.nio.ByteBuffer.wrap(read.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1)))
                    .toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return read;
        }
    }

    /**
     * Header {@code name}'s value as {@link #asSent} reads it, refusing one whose bytes are not UTF-8: left one char
     * per byte, {@code Jos\xE9} read as the same text as {@code Jos\xC3\xA9} decoded, so two clients whose headers
     * differ shared a key, and one used up the other's limit (a review found it). A path or query so sent is refused
     * already. For the gateway only, whose HTTP decoder reads one char per byte: a servlet container may hand over
     * text decoded already.
     */
    public static String headerAsSent(String name, String read) {
        String sent = asSent(read);
        if (sent == null || sent != read) {
            return sent; // decoded from UTF-8
        }
        boolean pastAscii = false;
        for (int i = 0; i < read.length(); i++) { // one pass: this is on every request a policy reads a header of
            char c = read.charAt(i);
            if (c > 0xFF) {
                return sent; // decoded already
            }
            pastAscii |= c >= 0x80;
        }
        if (!pastAscii) {
            return sent;
        }
        int at = StrictUtf8.firstBadByte(read.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
        throw new BadRequest("header " + name + ": its bytes are not UTF-8 (byte " + String.format("0x%02X",
                (int) read.charAt(Math.max(at, 0))) + " at " + Math.max(at, 0) + "); a header that Sluice reads is sent"
                + " in UTF-8");
    }

    /** {@code api.example.com:8443} → {@code api.example.com}; {@code [::1]:80} → {@code [::1]}. */
    public static String hostWithoutPort(String host) {
        if (host == null || host.isEmpty()) {
            return null;
        }
        int colon = host.lastIndexOf(':');
        if (colon > host.lastIndexOf(']')) {
            host = host.substring(0, colon);
        }
        // "api.example.com." is the same host, fully qualified, and routed as it (a past bug: it escaped a
        // policy for api.example.com)
        if (host.length() > 1 && host.endsWith(".")) {
            host = host.substring(0, host.length() - 1);
        }
        return host.toLowerCase(java.util.Locale.ROOT);
    }
}
