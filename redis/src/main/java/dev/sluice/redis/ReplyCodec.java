package dev.sluice.redis;

import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * How the store's connections turn strings into bytes and back: keys and arguments go out as UTF-8, exactly as
 * Lettuce's {@link StringCodec} sends them, and every value that comes back is read one char per byte
 * (ISO-8859-1), so that a binary answer reaches Java whole.
 *
 * <p>Why: {@code gcra.lua} answers binary (five numbers packed by {@code struct.pack}, see the script), which
 * UTF-8 decoding would mangle (bytes above 127 that are no UTF-8 sequence become U+FFFD). {@code decide.lua}
 * answers ASCII text, which reads the same in both charsets. The store reads no other value on these connections.
 */
final class ReplyCodec implements RedisCodec<String, String>, ToByteBufEncoder<String, String> {
    static final ReplyCodec INSTANCE = new ReplyCodec();
    private static final StringCodec UTF8 = StringCodec.UTF8;

    private ReplyCodec() {
    }

    @Override
    public String decodeKey(ByteBuffer bytes) {
        return UTF8.decodeKey(bytes);
    }

    @Override
    public String decodeValue(ByteBuffer bytes) {
        byte[] value = new byte[bytes.remaining()];
        bytes.get(value);
        return new String(value, StandardCharsets.ISO_8859_1);
    }

    @Override
    public ByteBuffer encodeKey(String key) {
        return UTF8.encodeKey(key);
    }

    @Override
    public ByteBuffer encodeValue(String value) {
        return UTF8.encodeValue(value);
    }

    @Override
    public void encodeKey(String key, ByteBuf target) {
        UTF8.encodeKey(key, target);
    }

    @Override
    public void encodeValue(String value, ByteBuf target) {
        UTF8.encodeValue(value, target);
    }

    @Override
    public int estimateSize(Object keyOrValue) {
        return UTF8.estimateSize(keyOrValue);
    }

    @Override
    public boolean isEstimateExact() {
        return UTF8.isEstimateExact();
    }
}
