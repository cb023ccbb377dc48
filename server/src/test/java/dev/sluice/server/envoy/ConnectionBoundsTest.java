package dev.sluice.server.envoy;

import dev.sluice.server.HeldStore;
import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.envoy.RawHttp2Client.Frame;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.testkit.LogCapture;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.Code;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2Headers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static dev.sluice.server.envoy.EnvoyRateLimitServer.MOST_CALLS_PER_CONNECTION;
import static dev.sluice.server.envoy.EnvoyRateLimitServer.SEND_TIMEOUT;
import static dev.sluice.server.envoy.RateLimitServiceTest.descriptor;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What one connection to Envoy's rate limit service may hold, each bound found by attacking the port: calls open at
 * once, resets, idleness, answers left unread. Clients that no library would be are written frame by frame
 * ({@link RawHttp2Client}); each test also checks that a well-behaved client on another connection is still answered.
 */
class ConnectionBoundsTest {
    private LiveConfig live;
    private ServiceUnderTest server;

    @BeforeEach
    void start() throws Exception {
        live = LiveConfig.of(ConfigLoader.parse("envoy.yaml", RateLimitServiceTest.CONFIG), new ServerMetrics());
        server = ServiceUnderTest.start(live);
    }

    @AfterEach
    void stop() throws Exception {
        server.close();
        live.close();
    }

    private static RateLimitRequest request(RateLimitDescriptor... descriptors) {
        return RateLimitRequest.newBuilder().setDomain("edge").addAllDescriptors(List.of(descriptors)).build();
    }

    private RateLimitResponse ask(RateLimitDescriptor... descriptors) {
        return server.envoy().shouldRateLimit(request(descriptors));
    }

    /**
     * Found by attacking the port: one connection opened a million calls that sent their headers and nothing more,
     * and a server of 512 MB ran out of memory. One connection now has at most a thousand calls open at once; a
     * client such as grpc-java's, or Envoy, holds the rest until one ends, and every call is answered.
     */
    @Test
    void oneConnectionHasAtMostAThousandCallsOpenAtOnce() throws Exception {
        HeldStore store = new HeldStore();
        int most = MOST_CALLS_PER_CONNECTION;
        int total = most + 50;
        try (LiveConfig held = LiveConfig.of(ConfigLoader.parse("envoy.yaml", RateLimitServiceTest.CONFIG), store, new ServerMetrics());
             ServiceUnderTest service = ServiceUnderTest.start(held)) {
            try {
                store.hold();
                var stub = RateLimitServiceGrpc.newFutureStub(service.channel()).withDeadlineAfter(60, TimeUnit.SECONDS);
                java.util.List<com.google.common.util.concurrent.ListenableFuture<RateLimitResponse>> calls =
                        new java.util.ArrayList<>();
                for (int i = 0; i < total; i++) {
                    calls.add(stub.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                            .addDescriptors(descriptor("bulk", "b" + i)).build()));
                }
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (store.asked() < most && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                Thread.sleep(500); // time for more, were more let in
                assertThat(store.asked()).as("calls being decided at once").isEqualTo(most);
                store.release();
                for (var call : calls) {
                    assertThat(call.get(60, TimeUnit.SECONDS).getOverallCode()).isEqualTo(Code.OK);
                }
                assertThat(store.asked()).isEqualTo(total);
            } finally {
                store.release();
            }
        }
    }

    /**
     * HTTP/2 "rapid reset" (CVE-2023-44487), found by attacking the port: one connection opened and reset 543,000
     * streams a second, and 137,000 of them were decided. A connection that resets more than 10,000 streams a second
     * is now ended with a GOAWAY of ENHANCE_YOUR_CALM. Here a raw HTTP/2 client opens and resets 30,000 calls as fast
     * as it can write them; a gRPC client on another connection goes on being answered.
     */
    @Test
    void aConnectionThatResetsStreamsFasterThanTenThousandASecondIsEnded() throws Exception {
        try (RawHttp2Client client = new RawHttp2Client(server.port(), 0)) {
            CompletableFuture<Long> goAway = client.goAway();
            client.preface();
            byte[] headers = RawHttp2Client.callHeaders();
            long sent = 0;
            try {
                for (int stream = 1; stream < 2 * 30_000 && !goAway.isDone(); stream += 2) {
                    client.write(RawHttp2Client.HEADERS, RawHttp2Client.END_HEADERS, stream, headers);
                    client.write(RawHttp2Client.RST_STREAM, 0, stream, new byte[] {0, 0, 0, 8}); // CANCEL
                    sent++;
                }
                client.flush();
            } catch (IOException e) {
                // the server ended the connection while the client was still writing
            }
            assertEndedForResets(goAway, sent);
        }
        assertThat(ask(descriptor("bulk", "after")).getOverallCode()).isEqualTo(Code.OK);
    }

    /**
     * HTTP/2 "MadeYouReset" (CVE-2025-8671): the client makes the server reset its streams, by a frame the server must
     * answer with a reset (here a WINDOW_UPDATE of 0 on a call already sent whole, a stream error), and so opens and
     * ends calls as fast as rapid reset did while sending no reset of its own. gRPC counted only the resets it
     * received against the bound (until 1.75); here 30,000 calls, each decided, then reset by the server, end the
     * connection with GOAWAY ENHANCE_YOUR_CALM as rapid reset does. And the log stays quiet: each of those resets
     * logged a 30-line warning, 15,000 in two seconds.
     */
    @Test
    void aConnectionThatMakesTheServerResetStreamsFasterThanTenThousandASecondIsEnded() throws Exception {
        try (LogCapture grpc = LogCapture.of("io.grpc");
             RawHttp2Client client = new RawHttp2Client(server.port(), 0)) {
            CompletableFuture<Long> goAway = client.goAway();
            client.preface();
            RateLimitRequest call = request(descriptor("bulk", "made-you-reset"));
            long sent = 0;
            try {
                for (int stream = 1; stream < 2 * 30_000 && !goAway.isDone(); stream += 2) {
                    client.call(stream, call);
                    client.windowUpdate(stream, 0); // PROTOCOL_ERROR on the stream: the server resets it
                    sent++;
                }
                client.flush();
            } catch (IOException e) {
                // the server ended the connection while the client was still writing
            }
            assertEndedForResets(goAway, sent);
            assertThat(grpc.records()).as("gRPC's log of those calls").isEmpty();
        }
        assertThat(ask(descriptor("bulk", "after")).getOverallCode()).isEqualTo(Code.OK);
    }

    /**
     * The connection was ended for its resets: a GOAWAY of ENHANCE_YOUR_CALM, or a reset of the socket before the
     * client read that GOAWAY. The server closes right after its GOAWAY, with the client's later frames still unread,
     * so its kernel answers with a reset, and the client's kernel may drop what it had not read yet, the GOAWAY
     * among it (a CI run saw so). Unbounded, the connection is never ended and this waits in vain.
     */
    private static void assertEndedForResets(CompletableFuture<Long> goAway, long sent) throws Exception {
        assertThat(goAway.get(20, TimeUnit.SECONDS)).as("GOAWAY ENHANCE_YOUR_CALM (or the reset that may hide it) "
                + "after %d resets", sent).isIn(0xBL, -1L);
    }

    /**
     * Found by attacking the port on gRPC 1.62: HTTP/2 let it apply the server's
     * {@code SETTINGS_MAX_CONCURRENT_STREAMS} only once the client acknowledged it, and a client that never did
     * opened 192,000 calls on one connection, until the server's heap ran out. The bound now holds from the start.
     * Here such a client opens 1,005 calls, their headers only: the last five are refused ({@code RST_STREAM
     * REFUSED_STREAM}); the thousand, sent whole, are answered; and a call after them on the same connection is too.
     */
    @Test
    void aClientThatNeverAcknowledgesTheSettingsIsHeldToAThousandCallsAllTheSame() throws Exception {
        int over = 5;
        try (RawHttp2Client client = new RawHttp2Client(server.port(), 0)) {
            client.preface(); // its own SETTINGS; the server's it never acknowledges
            client.windowUpdate(0, 1 << 30); // room for a thousand answers of some 190 bytes
            byte[] headers = RawHttp2Client.callHeaders();
            for (int i = 0; i < MOST_CALLS_PER_CONNECTION + over; i++) {
                client.write(RawHttp2Client.HEADERS, RawHttp2Client.END_HEADERS, 2 * i + 1, headers);
            }
            client.flush();
            List<Integer> refused = new ArrayList<>();
            while (refused.size() < over) {
                Frame frame = client.read();
                assertThat(frame.type()).as("a frame the server sent").isNotIn(RawHttp2Client.HEADERS, RawHttp2Client.GOAWAY);
                if (frame.type() == RawHttp2Client.RST_STREAM) {
                    assertThat(java.nio.ByteBuffer.wrap(frame.payload()).getInt()).as("REFUSED_STREAM").isEqualTo(7);
                    refused.add(frame.stream());
                }
            }
            int firstOver = 2 * MOST_CALLS_PER_CONNECTION + 1;
            assertThat(refused).containsExactly(firstOver, firstOver + 2, firstOver + 4, firstOver + 6, firstOver + 8);
            for (int i = 0; i < MOST_CALLS_PER_CONNECTION; i++) {
                client.write(RawHttp2Client.DATA, RawHttp2Client.END_STREAM, 2 * i + 1,
                        RawHttp2Client.message(request(descriptor("bulk", "never-acked-" + i))));
            }
            client.flush();
            java.util.Set<Integer> answered = new java.util.HashSet<>();
            while (answered.size() < MOST_CALLS_PER_CONNECTION) {
                answered.add(answer(client));
            }
            assertThat(answered).allSatisfy(stream -> assertThat(stream).isLessThan(firstOver));
            client.call(firstOver + 2 * over, request(descriptor("bulk", "never-acked-after")));
            client.flush();
            assertThat(answer(client)).isEqualTo(firstOver + 2 * over);
        }
    }

    /**
     * What a client that sends on a call refused past the thousand meets: Netty takes the frame for one on a call that
     * never was, and ends the connection ({@code PROTOCOL_ERROR}). HTTP/2 clients open at most 100 calls before they
     * have the server's settings, so only a client that floods meets it.
     */
    @Test
    void aClientThatSendsOnACallRefusedPastTheThousandHasItsConnectionEnded() throws Exception {
        try (RawHttp2Client client = new RawHttp2Client(server.port(), 0)) {
            client.preface();
            byte[] headers = RawHttp2Client.callHeaders();
            for (int i = 0; i <= MOST_CALLS_PER_CONNECTION; i++) {
                client.write(RawHttp2Client.HEADERS, RawHttp2Client.END_HEADERS, 2 * i + 1, headers);
            }
            client.flush();
            Frame refusal;
            do {
                refusal = client.read();
            } while (refusal.type() != RawHttp2Client.RST_STREAM);
            assertThat(refusal.stream()).isEqualTo(2 * MOST_CALLS_PER_CONNECTION + 1);
            CompletableFuture<Long> goAway = client.goAway();
            client.write(RawHttp2Client.DATA, RawHttp2Client.END_STREAM, refusal.stream(),
                    RawHttp2Client.message(request(descriptor("bulk", "refused"))));
            client.flush();
            assertThat(goAway.get(20, TimeUnit.SECONDS)).as("GOAWAY PROTOCOL_ERROR").isEqualTo(1L);
        }
    }

    /**
     * Found by attacking the port: a client that reads its answers but never opens its HTTP/2 window leaves every
     * answer past its first 65,535 bytes waiting in HTTP/2's queue, the call open (a thousand at most, 3 MB), and
     * such a connection stayed for good. Now the answers HTTP/2 holds are looked at every send timeout (60 s; here
     * 1 s), and a connection whose answer was held at two looks in a row is cut off with a reset. Here 500 calls of
     * 40 descriptors each (answers of about a kilobyte): the first few dozen fill the window.
     */
    @Test
    void aClientThatNeverOpensItsWindowIsCutOffOnceAnAnswerHasWaitedTheSendTimeout() throws Exception {
        int calls = 500;
        try (ServiceUnderTest service = ServiceUnderTest.start(live, EnvoyRateLimitServer.IDLE_CONNECTION, Duration.ofSeconds(1));
             RawHttp2Client client = new RawHttp2Client(service.port(), 0)) {
            client.preface(); // and never a WINDOW_UPDATE
            RateLimitRequest forty = fortyDescriptors();
            for (int i = 0; i < calls; i++) {
                client.call(2 * i + 1, forty);
            }
            client.flush();
            long sent = System.nanoTime();
            int ended = 0;
            IOException cut;
            try {
                while (true) {
                    Frame frame = client.read();
                    if (frame.type() == RawHttp2Client.HEADERS && frame.ends()) {
                        ended++;
                    }
                }
            } catch (IOException e) {
                cut = e;
            }
            long waited = System.nanoTime() - sent;
            assertThat(cut).as("cut off, not left until the client's read timeout").isNotInstanceOf(SocketTimeoutException.class);
            assertThat(cut.getMessage()).contains("reset");
            assertThat(waited).as("cut off after a send timeout, not before").isGreaterThan(TimeUnit.SECONDS.toNanos(1));
            assertThat(ended).as("calls ended before the window ran out").isPositive().isLessThan(calls);
            RateLimitResponse meanwhile = service.envoy().shouldRateLimit(request(descriptor("bulk", "after-cut")));
            assertThat(meanwhile.getOverallCode()).isEqualTo(Code.OK);
        }
    }

    /** A call of forty descriptors of a shadow policy: an answer of forty full statuses, about a kilobyte. */
    private static RateLimitRequest fortyDescriptors() {
        RateLimitDescriptor[] forty = new RateLimitDescriptor[40];
        java.util.Arrays.fill(forty, descriptor("generic_key", "trial"));
        return request(forty);
    }

    /**
     * Reads frames up to the next that ends a call, which must be an answer ({@code grpc-status} 0); its stream.
     * Decodes every header block on the way, in order: HPACK's table is the connection's.
     */
    private static int answer(RawHttp2Client client) throws IOException {
        while (true) {
            Frame frame = client.read();
            assertThat(frame.type()).as("a frame the server sent").isNotIn(RawHttp2Client.RST_STREAM, RawHttp2Client.GOAWAY);
            if (frame.type() != RawHttp2Client.HEADERS) {
                continue;
            }
            Http2Headers headers = client.headers(frame);
            if (frame.ends()) {
                assertThat(String.valueOf(headers.get("grpc-status"))).as("stream %d's status", frame.stream()).isEqualTo("0");
                return frame.stream();
            }
        }
    }

    /**
     * Sends {@code request} on {@code client} as fast as it can write, on another thread, up to {@code cap} calls;
     * {@code sent} counts them. Completes with the failure that ended the writing, or null if every call went.
     */
    private static CompletableFuture<IOException> sendUpTo(RawHttp2Client client, RateLimitRequest request, int cap,
                                                           AtomicLong sent) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                for (int stream = 1; sent.get() < cap; stream += 2) {
                    client.call(stream, request);
                    if (sent.incrementAndGet() % 64 == 0) {
                        client.flush();
                    }
                }
                client.flush();
                return null;
            } catch (IOException e) {
                return e;
            }
        });
    }

    /** Waits until {@code sent} has not moved for a second (true), or the writing is done, or 30 s have passed. */
    private static boolean stalls(AtomicLong sent, CompletableFuture<?> writing) throws InterruptedException {
        long seen = -1;
        long still = System.nanoTime();
        long deadline = still + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline && !writing.isDone()) {
            Thread.sleep(100);
            if (sent.get() != seen) {
                seen = sent.get();
                still = System.nanoTime();
            } else if (System.nanoTime() - still >= TimeUnit.SECONDS.toNanos(1)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Found by attacking the port: gRPC read every call of a client that read no answers, and kept each with its
     * answer waiting, 3 KB a call, until the direct memory ran out and the connection's event loop stalled for good
     * (122,000 calls in seconds). Now a connection whose answers wait is read no further, so the client's own writes
     * wait; and once its answers have waited the send timeout (60 s; here 5 s) it is cut off. Here the client sends
     * up to 50,000 calls of 40 descriptors each, with a receive buffer of 4 KB and windows opened wide: its writes
     * stop well before, while a client on another connection is answered, and its connection is then reset.
     */
    @Test
    void aClientThatReadsNoAnswersIsReadNoFurtherAndCutOffAtTheSendTimeout() throws Exception {
        int cap = 50_000;
        try (ServiceUnderTest service = ServiceUnderTest.start(live, EnvoyRateLimitServer.IDLE_CONNECTION, Duration.ofSeconds(5));
             RawHttp2Client client = new RawHttp2Client(service.port(), 4096)) {
            client.preface(4, Integer.MAX_VALUE); // SETTINGS_INITIAL_WINDOW_SIZE: every stream's window wide open
            client.windowUpdate(0, Integer.MAX_VALUE - 65_535); // and the connection's
            AtomicLong sent = new AtomicLong();
            CompletableFuture<IOException> writing = sendUpTo(client, fortyDescriptors(), cap, sent);
            assertThat(stalls(sent, writing)).as("the client's writes wait (%d calls sent of %d)", sent.get(), cap).isTrue();
            long stalled = System.nanoTime();
            RateLimitResponse meanwhile = service.envoy().shouldRateLimit(request(descriptor("bulk", "meanwhile")));
            assertThat(meanwhile.getOverallCode()).isEqualTo(Code.OK);
            IOException cut = writing.get(20, TimeUnit.SECONDS);
            assertThat(cut).as("the connection was cut off").isNotNull();
            assertThat(cut.getMessage()).contains("reset");
            // by the watch of unread answers, 5 s after they stopped being written: the look at answers held for a
            // window, which an unwritable connection has too, cuts only at its second look, 10 s after the start
            assertThat(System.nanoTime() - stalled).as("cut off at the send timeout, not at once, and not by the look")
                    .isBetween(TimeUnit.SECONDS.toNanos(2), TimeUnit.SECONDS.toNanos(7));
        }
    }

    /**
     * The other side of {@link #aClientThatReadsNoAnswersIsReadNoFurtherAndCutOffAtTheSendTimeout}: a client that
     * stops reading until its writes wait, then reads, is read again and loses nothing. Every one of its 40,000 calls
     * is answered, and the connection goes on. A read held back and never asked for again would leave it waiting.
     */
    @Test
    void aClientThatReadsAgainIsReadAgainAndEveryCallAnswered() throws Exception {
        int calls = 40_000;
        try (RawHttp2Client client = new RawHttp2Client(server.port(), 4096)) {
            client.preface(4, Integer.MAX_VALUE);
            client.windowUpdate(0, Integer.MAX_VALUE - 65_535);
            AtomicLong sent = new AtomicLong();
            CompletableFuture<IOException> writing = sendUpTo(client, fortyDescriptors(), calls, sent);
            assertThat(stalls(sent, writing)).as("the client's writes wait (%d calls sent of %d)", sent.get(), calls).isTrue();
            int answered = 0;
            while (answered < calls) {
                answer(client);
                answered++;
            }
            assertThat(writing.get(20, TimeUnit.SECONDS)).as("every call written").isNull();
            client.call(2 * calls + 1, request(descriptor("bulk", "read-again")));
            client.flush();
            assertThat(answer(client)).isEqualTo(2 * calls + 1);
        }
    }

    /**
     * A past bug, found by a review: gRPC keeps what a call's message has sent so far and opens the window for more,
     * so a client sending messages of a megabyte but their last byte held 49 MB a connection (a gigabyte, by the
     * bounds of a message and of the calls open). A connection holding more than {@link CallsHeld#MOST_A_CONNECTION}
     * in messages begun is cut off (a reset, no GOAWAY); a client on another connection goes on being answered. Here
     * a client sends nine such messages, as fast as the server's window lets it.
     */
    @Test
    void aConnectionHoldingTooMuchInHoldingClientIsCutOff() throws Exception {
        java.util.concurrent.ExecutorService readers = java.util.concurrent.Executors.newCachedThreadPool();
        try (HoldingClient client = new HoldingClient(server.port(), readers)) {
            long sent = client.send(9);
            assertThat(client.ended.get(30, TimeUnit.SECONDS)).as("cut off, without a GOAWAY (%d bytes sent)", sent)
                    .isEqualTo(-1L);
            assertThat(sent).as("before all nine messages were sent").isLessThan(9L * HoldingClient.BEGUN)
                    .isGreaterThan(CallsHeld.MOST_A_CONNECTION);
        } finally {
            readers.shutdownNow();
        }
        assertThat(ask(descriptor("bulk", "after")).getOverallCode()).isEqualTo(Code.OK);
    }

    /**
     * The bound over every connection: 22 connections each holding three messages begun (3 MB, within a connection's
     * bound) pass {@link CallsHeld#MOST_IN_ALL} together, and one of them, the one holding the most, is cut off;
     * the others are kept, and a client on another connection is answered.
     */
    @Test
    void messagesBegunOverEveryConnectionPastTheBoundCutOffTheConnectionHoldingTheMost() throws Exception {
        assertOneCutOff(22, client -> client.send(3));
    }

    /**
     * A past bug, found by a review: a connection has at most a thousand calls open, but nothing bounded them over
     * every connection, and 200 connections of a thousand calls that sent their headers and nothing more ran a server
     * of 256 MB out of heap in six seconds. Past {@link CallsHeld#MOST_CALLS_IN_ALL} calls open, the connection with
     * the most is cut off; the others are kept, and a client on another connection is answered.
     */
    @Test
    void callsOpenOverEveryConnectionPastTheBoundCutOffTheConnectionWithTheMost() throws Exception {
        assertOneCutOff((int) (CallsHeld.MOST_CALLS_IN_ALL / MOST_CALLS_PER_CONNECTION) + 1,
                client -> client.open(MOST_CALLS_PER_CONNECTION));
    }

    /** What a {@link HoldingClient} is made to hold. */
    @FunctionalInterface
    private interface Holding {
        void hold(HoldingClient client) throws Exception;
    }

    /**
     * {@code connections} clients, each made to hold what {@code holding} says, one after the other: exactly one is
     * cut off (a reset, no GOAWAY), the others are kept, and a client on another connection is answered.
     */
    private void assertOneCutOff(int connections, Holding holding) throws Exception {
        java.util.concurrent.ExecutorService readers = java.util.concurrent.Executors.newCachedThreadPool();
        List<HoldingClient> clients = new ArrayList<>();
        try {
            for (int i = 0; i < connections; i++) {
                HoldingClient client = new HoldingClient(server.port(), readers);
                clients.add(client);
                holding.hold(client);
            }
            Thread.sleep(1_000); // time for a cut to land
            assertThat(clients.stream().filter(client -> client.ended.isDone()).toList()).as("cut off").hasSize(1)
                    .allSatisfy(client -> assertThat(client.ended.get()).isEqualTo(-1L));
            assertThat(ask(descriptor("bulk", "meanwhile")).getOverallCode()).isEqualTo(Code.OK);
        } finally {
            for (HoldingClient client : clients) {
                client.close();
            }
            readers.shutdownNow();
        }
    }

    /**
     * A client that holds what it can: calls that send their headers and nothing more, or messages of a megabyte (16
     * bytes short of the largest, within a stream's window) all sent but their last byte, as fast as the server's
     * window for the connection lets it.
     */
    private static final class HoldingClient implements AutoCloseable {
        static final int LENGTH = EnvoyRateLimitServer.MOST_BYTES_A_MESSAGE - 16;
        /** What a message sends: its 5 bytes of prefix, and all of it but the last byte. */
        static final int BEGUN = 5 + LENGTH - 1;

        final RawHttp2Client client;
        /** How the connection ended: -1 without a GOAWAY, -2 still open after 20 s, else the GOAWAY's code. */
        final CompletableFuture<Long> ended;
        private final AtomicLong window = new AtomicLong(65_535); // the connection's, widened as the server reads
        private int nextStream = 1;

        HoldingClient(int port, java.util.concurrent.Executor readers) throws IOException {
            client = new RawHttp2Client(port, 0);
            client.preface();
            client.flush();
            ended = CompletableFuture.supplyAsync(() -> {
                try {
                    while (true) {
                        Frame frame = client.read();
                        if (frame.type() == RawHttp2Client.WINDOW_UPDATE && frame.stream() == 0) {
                            window.addAndGet(java.nio.ByteBuffer.wrap(frame.payload()).getInt() & 0x7FFF_FFFF);
                        } else if (frame.type() == RawHttp2Client.GOAWAY) {
                            return java.nio.ByteBuffer.wrap(frame.payload(), 4, 4).getInt() & 0xFFFF_FFFFL;
                        }
                    }
                } catch (SocketTimeoutException e) {
                    return -2L;
                } catch (IOException e) {
                    return -1L;
                }
            }, readers);
        }

        /** Opens {@code calls} more calls that send their headers and nothing more. */
        void open(int calls) throws IOException {
            for (int i = 0; i < calls; i++, nextStream += 2) {
                client.write(RawHttp2Client.HEADERS, RawHttp2Client.END_HEADERS, nextStream, RawHttp2Client.callHeaders());
            }
            client.flush();
        }

        /** Begins {@code messages} more, each on a call of its own; the bytes sent, up to a cut. */
        long send(int messages) throws InterruptedException {
            byte[] body = new byte[BEGUN];
            java.nio.ByteBuffer.wrap(body).put((byte) 0).putInt(LENGTH);
            long sent = 0;
            try {
                for (int i = 0; i < messages && !ended.isDone(); i++, nextStream += 2) {
                    client.write(RawHttp2Client.HEADERS, RawHttp2Client.END_HEADERS, nextStream, RawHttp2Client.callHeaders());
                    for (int at = 0; at < body.length && !ended.isDone(); ) {
                        int frame = Math.min(16_384, body.length - at);
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                        while (window.get() < frame && !ended.isDone() && System.nanoTime() < deadline) {
                            client.flush();
                            Thread.sleep(1);
                        }
                        assertThat(window.get() >= frame || ended.isDone()).as("the server widens the window").isTrue();
                        window.addAndGet(-frame);
                        client.write(RawHttp2Client.DATA, 0, nextStream, java.util.Arrays.copyOfRange(body, at, at + frame));
                        at += frame;
                        sent += frame;
                    }
                }
                client.flush();
            } catch (IOException cut) {
                // reset while writing
            }
            return sent;
        }

        @Override
        public void close() throws IOException {
            client.close();
        }
    }

    /**
     * Found by attacking the port: connections that sent nothing, or the HTTP/2 preface alone, were kept for ever,
     * about 15 KB and a file descriptor each. A connection with no call open is now ended once idle (five minutes;
     * here 300 ms), as gRPC's {@code maxConnectionIdle} does: with a GOAWAY and a PING, then, the PING unanswered,
     * closed 10 s later (gRPC's grace for a client to finish). A channel in use is not.
     */
    @Test
    void anIdleConnectionIsEndedAndOneInUseIsNot() throws Exception {
        try (ServiceUnderTest service = ServiceUnderTest.start(live, Duration.ofMillis(300), SEND_TIMEOUT);
             java.net.Socket silent = new java.net.Socket("127.0.0.1", service.port());
             java.net.Socket prefaceOnly = new java.net.Socket("127.0.0.1", service.port())) {
            // the client's preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0)
            prefaceOnly.getOutputStream().write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            prefaceOnly.getOutputStream().write(new byte[] {0, 0, 0, 4, 0, 0, 0, 0, 0});
            prefaceOnly.getOutputStream().flush();
            var stub = RateLimitServiceGrpc.newBlockingStub(service.channel());
            long started = System.nanoTime();
            for (java.net.Socket idle : List.of(silent, prefaceOnly)) {
                idle.setSoTimeout(30_000);
                java.io.InputStream in = idle.getInputStream();
                while (in.read() != -1) { // the server's SETTINGS and GOAWAY, then the end
                    // meanwhile the busy channel keeps a call open now and then
                    stub.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                            .addDescriptors(descriptor("bulk", "b")).build());
                }
            }
            assertThat(System.nanoTime() - started).as("both ended, well before the read timeout")
                    .isLessThan(TimeUnit.SECONDS.toNanos(20));
            for (int i = 0; i < 8; i++) { // 800 ms with calls 100 ms apart: never idle 300 ms
                Thread.sleep(100);
                assertThat(stub.shouldRateLimit(RateLimitRequest.newBuilder().setDomain("edge")
                        .addDescriptors(descriptor("bulk", "b" + i)).build()).getOverallCode()).isEqualTo(Code.OK);
            }
            assertThat(service.channel().getState(false)).isEqualTo(io.grpc.ConnectivityState.READY);
        }
    }

}
