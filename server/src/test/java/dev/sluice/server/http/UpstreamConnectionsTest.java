package dev.sluice.server.http;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.EventLoop;
import io.vertx.core.Vertx;
import io.vertx.core.impl.VertxInternal;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

import static org.assertj.core.api.Assertions.assertThat;

/** One event loop's connections to an upstream that accepts and holds them, with room for one connection. */
class UpstreamConnectionsTest {
    private Vertx vertx;
    private EventLoop loop;
    private ServerSocket upstream;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();

    @BeforeEach
    void start() throws IOException {
        vertx = Vertx.vertx();
        loop = (EventLoop) vertx.nettyEventLoopGroup().next();
        upstream = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread accepting = new Thread(() -> {
            try {
                while (true) {
                    accepted.add(upstream.accept());
                }
            } catch (IOException closed) {
                // the test is over
            }
        });
        accepting.setDaemon(true);
        accepting.start();
    }

    @AfterEach
    void stop() throws Exception {
        upstream.close();
        for (Socket socket : accepted) {
            socket.close();
        }
        vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }

    private UpstreamConnections connections(long timeoutMs) {
        return new UpstreamConnections((VertxInternal) vertx, loop, "127.0.0.1", upstream.getLocalPort(), null,
                timeoutMs, 2_000, 1);
    }

    /** What a lease is told: the channel it is granted, or why not. */
    private static final class Told implements UpstreamConnections.Lease {
        final CompletableFuture<Channel> granted = new CompletableFuture<>();

        @Override
        public void granted(Channel channel, boolean reused) {
            granted.complete(channel);
        }

        @Override
        public void failed(Throwable cause) {
            granted.completeExceptionally(cause);
        }
    }

    /** Asks for {@code leases} in order, on the connections' loop. */
    private void lease(UpstreamConnections connections, Told... leases) throws Exception {
        onLoop(() -> {
            for (Told lease : leases) {
                connections.lease(lease);
            }
            return null;
        });
    }

    private <T> T onLoop(Supplier<T> task) throws Exception {
        CompletableFuture<T> done = new CompletableFuture<>();
        loop.execute(() -> done.complete(task.get()));
        return done.get(10, TimeUnit.SECONDS);
    }

    /**
     * A name of several addresses (a headless Service): each new connection goes to the next address of the preferred
     * family, as nginx and Envoy spread them. Past weaknesses: the first address took every connection; then Netty's
     * round robin picked at random, from both families, and an IPv6 address nothing listened on failed connections.
     */
    @Test
    void theConnectionsToANameOfSeveralAddressesGoToEachInTurn() throws Exception {
        java.net.DatagramSocket dns = new java.net.DatagramSocket(0, InetAddress.getLoopbackAddress());
        Thread answering = new Thread(() -> answerTwoAddresses(dns));
        answering.setDaemon(true);
        answering.start();
        Vertx named = Vertx.vertx(new io.vertx.core.VertxOptions().setAddressResolverOptions(
                new io.vertx.core.dns.AddressResolverOptions()
                .setServers(List.of("127.0.0.1:" + dns.getLocalPort())).setOptResourceEnabled(false)
                .setHostsValue(io.vertx.core.buffer.Buffer.buffer("# none\n"))));
        try (ServerSocket second = new ServerSocket(upstream.getLocalPort(), 50, InetAddress.getByName("127.0.0.2"))) {
            List<String> reached = new CopyOnWriteArrayList<>();
            Thread accepting = new Thread(() -> {
                try {
                    while (true) {
                        Socket socket = second.accept();
                        accepted.add(socket);
                        reached.add("127.0.0.2");
                    }
                } catch (IOException closed) {
                    // the test is over
                }
            });
            accepting.setDaemon(true);
            accepting.start();
            EventLoop namedLoop = (EventLoop) named.nettyEventLoopGroup().next();
            UpstreamConnections connections = new UpstreamConnections((VertxInternal) named, namedLoop, "upstream.test",
                    upstream.getLocalPort(), null, 10_000, 2_000, 8);
            Told[] leases = new Told[4];
            CompletableFuture<Void> asked = new CompletableFuture<>();
            namedLoop.execute(() -> {
                for (int i = 0; i < leases.length; i++) {
                    leases[i] = new Told();
                    connections.lease(leases[i]);
                }
                asked.complete(null);
            });
            asked.get(10, TimeUnit.SECONDS);
            List<String> remotes = new java.util.ArrayList<>();
            for (Told lease : leases) {
                remotes.add(((java.net.InetSocketAddress) lease.granted.get(10, TimeUnit.SECONDS).remoteAddress())
                        .getAddress().getHostAddress());
            }
            assertThat(remotes).as("four connections, two to each IPv4 address in turn, none to the IPv6 one")
                    .containsOnly("127.0.0.1", "127.0.0.2").filteredOn("127.0.0.1"::equals).hasSize(2);
            for (int i = 1; i < remotes.size(); i++) {
                assertThat(remotes.get(i)).as("in turn").isNotEqualTo(remotes.get(i - 1));
            }
        } finally {
            named.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
            dns.close();
        }
    }

    /**
     * A DNS server of the test's own: every question for an A record is answered 127.0.0.1 and 127.0.0.2, as a
     * headless Service's name is answered with its pods, one for an AAAA record ::1 (where nothing listens), any
     * other with no record.
     */
    private static void answerTwoAddresses(java.net.DatagramSocket dns) {
        byte[] buffer = new byte[512];
        try {
            while (true) {
                java.net.DatagramPacket query = new java.net.DatagramPacket(buffer, buffer.length);
                dns.receive(query);
                byte[] in = query.getData();
                int end = 12;
                while (in[end] != 0) {
                    end += (in[end] & 0xFF) + 1; // the labels of the name
                }
                end += 5; // its zero, its type and class
                boolean a = in[end - 4] == 0 && in[end - 3] == 1;
                boolean aaaa = in[end - 4] == 0 && in[end - 3] == 28;
                java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
                out.write(in, 0, 2); // the query's id
                out.write(new byte[] {(byte) 0x81, (byte) 0x80, 0, 1, 0, (byte) (a ? 2 : aaaa ? 1 : 0), 0, 0, 0, 0}, 0, 10);
                out.write(in, 12, end - 12); // the question
                for (int last = 1; a && last <= 2; last++) {
                    out.write(new byte[] {(byte) 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, (byte) last}, 0, 16);
                }
                if (aaaa) {
                    out.write(new byte[] {(byte) 0xC0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16}, 0, 12);
                    byte[] loopback = new byte[16];
                    loopback[15] = 1;
                    out.write(loopback, 0, 16);
                }
                byte[] answer = out.toByteArray();
                dns.send(new java.net.DatagramPacket(answer, answer.length, query.getSocketAddress()));
            }
        } catch (IOException closed) {
            // the test is over
        }
    }

    /**
     * A past bug a review found: a connection that closed as its exchange ended (an answer ended by the upstream's
     * close) was given back after its place had been freed, and granted to the next request waiting, which then
     * waited for good on a closed connection.
     */
    @Test
    void aClosedConnectionGivenBackIsNeverGranted() throws Exception {
        UpstreamConnections connections = connections(10_000);
        Told first = new Told();
        Told second = new Told();
        Told third = new Told();
        lease(connections, first);
        Channel one = first.granted.get(10, TimeUnit.SECONDS);
        lease(connections, second, third);
        assertThat(second.granted).as("room for one").isNotDone();
        onLoop(() -> one.close().syncUninterruptibly()); // its place goes to the second, on a new connection
        onLoop(() -> {
            connections.giveBack(one); // as its exchange ends
            return null;
        });
        Channel two = second.granted.get(10, TimeUnit.SECONDS);
        assertThat(two).isNotSameAs(one);
        assertThat(two.isActive()).isTrue();
        Thread.sleep(100);
        assertThat(third.granted).as("not the closed one").isNotDone();
        onLoop(() -> {
            connections.giveBack(two);
            return null;
        });
        assertThat(third.granted.get(10, TimeUnit.SECONDS)).isSameAs(two);
    }

    /**
     * A review found a connection given back granted within the read that ended its answer, so that bytes the
     * upstream sent past the answer's length, read with it, were taken for the waiting request's answer. It is granted
     * once that read is over: such bytes close it first (an answer to nothing), and the request waiting gets another.
     */
    @Test
    void aConnectionGivenBackIsGrantedOnlyOnceTheReadThatEndedItsAnswerIsOver() throws Exception {
        UpstreamConnections connections = connections(10_000);
        Told first = new Told();
        Told second = new Told();
        lease(connections, first);
        Channel one = first.granted.get(10, TimeUnit.SECONDS);
        lease(connections, second);
        boolean grantedWithin = onLoop(() -> {
            connections.giveBack(one); // as its answer ends, in the read that ended it
            boolean granted = second.granted.isDone();
            one.close(); // as bytes past the answer, in the same read, close it
            return granted;
        });
        assertThat(grantedWithin).as("granted within the read").isFalse();
        Channel two = second.granted.get(10, TimeUnit.SECONDS);
        assertThat(two).isNotSameAs(one);
        assertThat(two.isActive()).isTrue();
    }

    @Test
    void aRequestWaitingLongerThanTheTimeoutForAConnectionIsToldSo() throws Exception {
        UpstreamConnections connections = connections(300);
        Told first = new Told();
        Told second = new Told();
        lease(connections, first);
        Channel one = first.granted.get(10, TimeUnit.SECONDS);
        // kept busy (else, idle for the timeout, it would be closed, and its place go to the second)
        var busy = loop.scheduleAtFixedRate(() -> one.writeAndFlush(Unpooled.EMPTY_BUFFER), 50, 50, TimeUnit.MILLISECONDS);
        long started = System.nanoTime();
        lease(connections, second);
        Throwable cause = second.granted.handle((channel, failure) -> failure).get(10, TimeUnit.SECONDS);
        assertThat(cause).isInstanceOf(TimeoutException.class).hasMessage("no connection to the upstream came free in time");
        assertThat(System.nanoTime() - started).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(250));
        busy.cancel(false);
    }

    @Test
    void aLeaseCancelledWhileWaitingIsNeverGranted() throws Exception {
        UpstreamConnections connections = connections(10_000);
        Told first = new Told();
        Told cancelled = new Told();
        Told next = new Told();
        lease(connections, first);
        Channel one = first.granted.get(10, TimeUnit.SECONDS);
        onLoop(() -> {
            connections.lease(cancelled);
            connections.lease(next);
            connections.cancel(cancelled);
            connections.giveBack(one);
            return null;
        });
        assertThat(next.granted.get(10, TimeUnit.SECONDS)).isSameAs(one);
        assertThat(cancelled.granted).isNotDone();
    }
}
