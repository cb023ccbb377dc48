package dev.sluice.server.envoy;

import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.grpc.netty.shaded.io.netty.buffer.Unpooled;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.DefaultHttp2HeadersDecoder;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2Exception;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2Headers;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;

/**
 * An HTTP/2 client written by hand, frame by frame, for the clients no library would be: one that resets every
 * call, never acknowledges the server's SETTINGS, never opens its window or never reads. It writes what it is told,
 * reads a frame when asked, and decodes the server's header blocks with Netty's HPACK decoder (one for the
 * connection, as HPACK's table is the connection's).
 */
final class RawHttp2Client implements AutoCloseable {
    static final int DATA = 0, HEADERS = 1, RST_STREAM = 3, SETTINGS = 4, GOAWAY = 7, WINDOW_UPDATE = 8;
    static final int END_STREAM = 0x1, END_HEADERS = 0x4;

    /** A frame as read: its type, flags, stream and payload. */
    record Frame(int type, int flags, int stream, byte[] payload) {
        boolean ends() {
            return (flags & END_STREAM) != 0;
        }
    }

    private final Socket socket;
    private final OutputStream out;
    private final DataInputStream in;
    private final DefaultHttp2HeadersDecoder hpack = new DefaultHttp2HeadersDecoder(false);

    /** Connects, the socket's receive buffer {@code receiveBuffer} bytes (0: the system's). */
    RawHttp2Client(int port, int receiveBuffer) throws IOException {
        socket = new Socket();
        if (receiveBuffer > 0) {
            socket.setReceiveBufferSize(receiveBuffer); // before connecting, so the window offered is this small
        }
        socket.connect(new java.net.InetSocketAddress("127.0.0.1", port));
        socket.setSoTimeout(20_000);
        out = new BufferedOutputStream(socket.getOutputStream(), 1 << 16);
        in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
    }

    /** The client's preface, then a SETTINGS frame of {@code settings} (pairs of a 16-bit id and a 32-bit value). */
    RawHttp2Client preface(int... settings) throws IOException {
        out.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        ByteBuffer payload = ByteBuffer.allocate(settings.length / 2 * 6);
        for (int i = 0; i < settings.length; i += 2) {
            payload.putShort((short) settings[i]).putInt(settings[i + 1]);
        }
        write(SETTINGS, 0, 0, payload.array());
        return this;
    }

    void write(int type, int flags, int stream, byte[] payload) throws IOException {
        out.write(ByteBuffer.allocate(9 + payload.length).put((byte) (payload.length >> 16))
                .put((byte) (payload.length >> 8)).put((byte) payload.length).put((byte) type).put((byte) flags)
                .putInt(stream).put(payload).array());
    }

    /** A ShouldRateLimit call on {@code stream}: its headers, then {@code request} ending the stream. */
    void call(int stream, RateLimitRequest request) throws IOException {
        write(HEADERS, END_HEADERS, stream, callHeaders());
        write(DATA, END_STREAM, stream, message(request));
    }

    void windowUpdate(int stream, int increment) throws IOException {
        write(WINDOW_UPDATE, 0, stream, ByteBuffer.allocate(4).putInt(increment).array());
    }

    void flush() throws IOException {
        out.flush();
    }

    /** The next frame the server sent; a header block is decoded in order, keeping HPACK's table. */
    Frame read() throws IOException {
        int length = in.readUnsignedShort() << 8 | in.readUnsignedByte();
        int type = in.readUnsignedByte();
        int flags = in.readUnsignedByte();
        int stream = in.readInt() & 0x7FFF_FFFF;
        return new Frame(type, flags, stream, in.readNBytes(length));
    }

    /** The headers of a HEADERS frame this client read (the server sends no padding, priority or CONTINUATION). */
    Http2Headers headers(Frame frame) {
        try {
            return hpack.decodeHeaders(frame.stream(), Unpooled.wrappedBuffer(frame.payload()));
        } catch (Http2Exception e) {
            throw new AssertionError("the server's header block does not decode", e);
        }
    }

    /**
     * Reads every frame the server sends, on another thread, up to a GOAWAY: its error code; -1 if the connection
     * ends without one; -2 if nothing came for the read timeout (20 s), the connection still open. Nothing else may
     * read meanwhile.
     */
    CompletableFuture<Long> goAway() {
        return CompletableFuture.supplyAsync(() -> {
            try {
                while (true) {
                    Frame frame = read();
                    if (frame.type() == GOAWAY) { // the last stream in 4 bytes, then the error code
                        return ByteBuffer.wrap(frame.payload(), 4, 4).getInt() & 0xFFFF_FFFFL;
                    }
                }
            } catch (java.net.SocketTimeoutException e) {
                return -2L;
            } catch (IOException e) {
                return -1L;
            }
        });
    }

    Socket socket() {
        return socket;
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }

    /** The headers of a ShouldRateLimit call, in HPACK without Huffman coding or the dynamic table. */
    static byte[] callHeaders() {
        ByteArrayOutputStream block = new ByteArrayOutputStream();
        block.write(0x83); // :method POST (static 3)
        block.write(0x86); // :scheme http (static 6)
        literal(block, 0x04, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"); // :path (static 4)
        literal(block, 0x01, "localhost"); // :authority (static 1)
        literal(block, 31, "application/grpc"); // content-type (static 31)
        block.write(0x00); // te: trailers, a new name, not indexed
        hpackString(block, "te");
        hpackString(block, "trailers");
        return block.toByteArray();
    }

    /** A gRPC message: not compressed, its length, the request's bytes. */
    static byte[] message(RateLimitRequest request) {
        byte[] bytes = request.toByteArray();
        return ByteBuffer.allocate(5 + bytes.length).put((byte) 0).putInt(bytes.length).put(bytes).array();
    }

    /** A header field without indexing whose name is the static table's entry {@code index}. */
    private static void literal(ByteArrayOutputStream block, int index, String value) {
        if (index < 15) {
            block.write(index);
        } else {
            block.write(0x0F);
            block.write(index - 15);
        }
        hpackString(block, value);
    }

    private static void hpackString(ByteArrayOutputStream block, String text) {
        byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
        block.write(bytes.length); // under 127: one byte, no Huffman
        block.writeBytes(bytes);
    }
}
