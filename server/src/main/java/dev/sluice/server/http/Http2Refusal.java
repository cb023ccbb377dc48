package dev.sluice.server.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.DuplexChannel;
import io.netty.util.ReferenceCountUtil;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.net.impl.ConnectionBase;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * The answer to a client that speaks HTTP/2 from its first byte ({@code PRI * HTTP/2.0}, h2c with prior knowledge,
 * as Envoy with {@code http2_protocol_options} or an h2c mesh does). The gateway and the API speak HTTP/1.1 (an upgrade
 * to h2c is answered in HTTP/1.1), and an HTTP/1.1 answer means nothing to such a client: curl said "Empty reply from
 * server" (a review). So it is answered in its own protocol, as RFC 9113 lets a server that will not speak HTTP/2 do:
 * its empty {@code SETTINGS} (the preface a server owes), then {@code GOAWAY} with {@code HTTP_1_1_REQUIRED} and why,
 * and the connection closed.
 */
final class Http2Refusal {
    /** HTTP/2's error code for "use HTTP/1.1" (RFC 9113 §7). */
    static final int HTTP_1_1_REQUIRED = 0xd;
    /** What the {@code GOAWAY} says. */
    static final String WHY = "this server speaks HTTP/1.1; send HTTP/1.1, or ask to upgrade";
    /** The name Vert.x gives the HTTP/1.1 encoder in a connection's pipeline. */
    private static final String ENCODER = "httpEncoder";

    private Http2Refusal() {
    }

    /** What {@link StrictFraming} makes of the preface: the request's failure, which {@link #answer} is given. */
    static final class Preface extends IllegalArgumentException {
        Preface() {
            super("HTTP/2 without an upgrade: this server speaks HTTP/1.1");
        }
    }

    /**
     * Writes the two frames below the HTTP/1.1 encoder, which has no such frames, shuts the server's side, and closes
     * once the client closes its own (or after a second). What the client sends meanwhile (its own {@code SETTINGS}
     * follow its preface at once) is read and dropped: a close with its bytes unread is a reset, and the client may
     * lose the {@code GOAWAY} with it (a test saw it).
     */
    static void answer(HttpConnection connection) {
        Channel channel = ((ConnectionBase) connection).channel();
        ChannelPipeline pipeline = channel.pipeline();
        if (pipeline.get(StrictFraming.READS) != null) {
            pipeline.remove(StrictFraming.READS); // reads are no longer held for answers: there are none to come
        }
        pipeline.addFirst("sluiceHttp2Refused", new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext context, Object message) {
                ReferenceCountUtil.release(message);
            }

            @Override
            public void userEventTriggered(ChannelHandlerContext context, Object event) {
                if (event instanceof ChannelInputShutdownEvent) {
                    context.close(); // the client has closed its side too
                }
            }
        });
        channel.config().setAutoRead(true);
        ChannelHandlerContext encoder = pipeline.context(ENCODER);
        (encoder != null ? encoder : pipeline.firstContext()).writeAndFlush(frames()).addListener(written -> {
            if (written.isSuccess() && channel instanceof DuplexChannel duplex) {
                duplex.shutdownOutput();
                channel.eventLoop().schedule(() -> channel.close(), 1, TimeUnit.SECONDS);
            } else {
                channel.close();
            }
        });
    }

    /** An empty SETTINGS frame, then GOAWAY: no stream taken, HTTP_1_1_REQUIRED, and {@link #WHY} (RFC 9113 §4.1). */
    static ByteBuf frames() {
        byte[] why = WHY.getBytes(StandardCharsets.US_ASCII);
        ByteBuf frames = Unpooled.buffer(9 + 9 + 8 + why.length);
        frames.writeMedium(0).writeByte(0x4).writeByte(0).writeInt(0); // SETTINGS, none
        frames.writeMedium(8 + why.length).writeByte(0x7).writeByte(0).writeInt(0) // GOAWAY
                .writeInt(0) // the last stream taken: none
                .writeInt(HTTP_1_1_REQUIRED).writeBytes(why);
        return frames;
    }
}
