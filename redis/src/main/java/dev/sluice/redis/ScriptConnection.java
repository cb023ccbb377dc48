package dev.sluice.redis;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisConnectionException;
import io.netty.util.Timeout;
import io.netty.util.Timer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;

/**
 * A connection of Sluice's own to a standalone Redis, the only kind a standalone store has: the calls of
 * {@code gcra.lua} that the {@link Batcher}s send, every call of a script sent alone ({@code decide.lua},
 * {@code batch(1)}), and the resets ({@code DEL}, {@link #command}). The store ends the calls sent alone that Redis
 * does not answer in time; the batchers end their own.
 *
 * <h2>Why not Lettuce for these</h2>
 * On Lettuce a call is a command object, a codec's encoding, a future, a hand-over to the connection's Netty
 * event loop, a pipeline of handlers each way, and the command stack matched on the loop. A decision on Redis
 * is a chain of threads handing over to one another, and on a machine whose idle vCPUs halt each hand-over
 * costs more than the work. Measured before building (bench/README.md, nineteenth session), the same batching
 * over a plain socket with one reading thread ran 16 blocking callers about 25% faster, and one caller about 15%;
 * through the store and JMH, 16 callers a fifth to a third faster and 64 half as fast again. The gateway's client
 * taught the same lesson (its eighteenth session).
 *
 * <h2>How</h2>
 * Any thread writes a call whole, encoded as RESP ({@link RespWriter}), in one write to the socket, under the
 * connection's lock, and puts its answer at the end of the line: Redis answers the calls of a connection in the order
 * it got them.
 * One thread of the connection's own blocks on the socket, reads each answer and completes the first answer in
 * line with it, outside the lock. What that completion runs (the batcher answering its callers and sending its
 * next call) runs on that thread, as it ran on Lettuce's event loop.
 *
 * <p>The reading thread is also where a batcher sends a call from when it has none in flight ({@link #execute}):
 * while nothing is in line the thread is parked, not reading, and a call handed to it leaves when it wakes, with
 * every decision that arrived meanwhile (sixteen decisions started together: one call, not one of one and one of
 * fifteen a round trip later). When it is busy reading, a call is not handed but sent by its caller.
 *
 * <h2>Failures</h2>
 * <ul>
 *   <li>An error answer fails its call ({@link RedisCommandExecutionException}), but for {@code NOSCRIPT}: the
 *       call is sent again once with the script's text ({@code EVAL}), which loads it for the next calls.</li>
 *   <li>A connection lost (Redis stopped, the connection reset, an answer that is not RESP) fails every call in
 *       line with {@link RedisConnectionException}; the reading thread connects again after 1 ms, then 2, 4, ...
 *       up to a second between attempts, and meanwhile calls fail at once, as Lettuce's connections do with
 *       {@code REJECT_COMMANDS}. A connection idle for a second sends a {@code PING}: Redis's {@code timeout}
 *       then never closes it, and one closed otherwise is made again before a call fails on it. Each
 *       connection, made again too, is checked with {@code PING} after its {@code AUTH}, {@code SELECT} and
 *       {@code CLIENT SETNAME}.</li>
 *   <li>A Redis that holds the connection open but does not answer: the calls stay in line (their answers come
 *       in order once it answers again); the batchers time their decisions out, not this connection. But once
 *       it has not read for so long that a write blocks (its buffers and the socket's full), a write blocked for
 *       the store's timeout ends the connection as a lost one ({@link #watchWriting}); and so does a silence
 *       of four timeouts (at least 2 s) while calls wait ({@link #silentLimitMs}).</li>
 * </ul>
 */
final class ScriptConnection implements AutoCloseable, Executor {
    private static final long FIRST_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long LAST_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** How often an idle connection sends a PING ({@link #idleUntilWoken}). */
    private static final long IDLE_CHECK_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final String[] NO_WORDS = {};
    private static final String[] PING = {"PING"};
    /**
     * A connection on which calls wait and nothing has come for this many of the store's timeouts, and at least
     * {@link #SILENT_LIMIT_LEAST_MS}, is taken for lost ({@link #silentLimitMs}).
     */
    private static final int SILENT_LIMIT_TIMEOUTS = 4;
    private static final int SILENT_LIMIT_LEAST_MS = 2_000;
    /** How long after a write is found blocked past its timeout it is looked at again ({@link #lookAtWriting}). */
    private static final long SECOND_LOOK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    /**
     * Where to connect and how to introduce oneself: the parts of a {@code redis://} address this connection uses
     * ({@code clientName}: null, or the name {@code CLIENT SETNAME} gives it, as {@code ?clientName=} asks).
     */
    record Address(String host, int port, String user, String password, int database, String clientName,
                   SSLSocketFactory tls, Sentinels sentinels) {
        @Override
        public String toString() {
            return sentinels != null ? sentinels.toString() : host + ":" + port; // never the password
        }
    }

    /**
     * A call waiting for its answer: what to send again if Redis does not know the script; a command that is not
     * a script has no {@code text} and its words in {@code arguments}.
     */
    private record Pending(CompletableFuture<String> answer, String text, String[] keys, String[] arguments,
                           boolean withText) {
        boolean script() {
            return text != null;
        }
    }

    private final Address address;
    private final int connectTimeoutMs;
    private final Runnable onReload;
    private final Object lock = new Object();
    /** The calls written and not answered yet, oldest first. Guarded by {@link #lock}. */
    private final ArrayDeque<Pending> line = new ArrayDeque<>();
    /** The socket calls are written to; null while connecting again. Guarded by {@link #lock}. */
    private Link link;
    /** Where each call is encoded before its one write. Guarded by {@link #lock}. */
    private RespWriter writer = new RespWriter();
    private volatile boolean closed;
    private final Thread reader;
    /** Calls handed to the reading thread ({@link #execute}). Guarded by {@link #lock}. */
    private final ArrayDeque<Runnable> handed = new ArrayDeque<>();
    /** True while the reading thread is parked: nothing in line, nothing handed. Guarded by {@link #lock}. */
    private boolean idle;
    /** How long a write may block before the connection is taken for lost ({@link #watchWriting}). */
    private final long writeTimeoutNanos;
    /**
     * How long the reading thread waits for an answer's next bytes before it takes the connection for lost: a
     * Redis whose host vanished without closing it (a machine gone, a firewall or NAT that dropped the flow) sends
     * nothing, not even a reset, and the kernel gives up on it only after about 15 minutes; meanwhile every call in
     * line, probes of the breaker included, timed out, and the store never recovered (a bug a review found).
     * Four of the store's timeouts and at least 2 s, as Jedis's read timeout: no call of the store's waits that
     * long for its answer, and a Redis hung so long (a script of another client, a stalled fork) only costs a
     * connection made again once it answers.
     */
    private final int silentLimitMs;
    /** Where the watch on writes is set. */
    private final Timer timer;
    /**
     * The link being written to, null between writes, and since when ({@link System#nanoTime()}): read by the
     * watch without the lock, which a blocked writer holds. Set in that order ({@code writingSince} first), so the
     * watch never sees a write older than it is.
     */
    private volatile Link writingTo;
    private volatile long writingSince;
    /** True while a watch on writes is set. */
    private final AtomicBoolean watching = new AtomicBoolean();
    /** The start of the write the watch found past its timeout at its last look. Only the timer's thread uses it. */
    private long overdue = Long.MIN_VALUE;
    /** Why the last attempt to connect again failed, while it does; null once connected. */
    private volatile String unreachable;
    /** Set once a connection is made ({@link #everConnected}). */
    private volatile boolean everConnected;
    /** Why the watch ended the connection, for the failure of the calls in line; null if it did not. */
    private volatile String endedFor;

    /**
     * One socket and what reads it: the TCP socket, and the streams of the TLS socket over it, if any. Closing is
     * always the TCP socket's: a TLS socket's close waits for a write that blocks, and ending such a write is what a
     * close from another thread is for ({@link #watchWriting}).
     */
    private static final class Link {
        final Socket socket;
        final OutputStream out;
        final RespReader in;

        Link(Socket socket, Socket streams) throws IOException {
            this.socket = socket;
            this.out = streams.getOutputStream();
            this.in = new RespReader(streams.getInputStream());
        }
    }

    /**
     * Connects, introducing itself as {@code address} says ({@code AUTH}, {@code SELECT}, {@code CLIENT SETNAME}),
     * and starts the reading thread.
     *
     * @throws RedisConnectionException if Redis cannot be reached or refuses the introduction
     * @param writeTimeoutNanos how long a write may block before the connection is taken for lost (the store's
     *                          timeout: a call that cannot even leave in that time cannot be answered in it)
     * @param timer    where the watch on a blocked write is set
     * @param onReload run each time a call is sent again with the script's text ({@code NOSCRIPT})
     */
    ScriptConnection(Address address, int connectTimeoutMs, long writeTimeoutNanos, Timer timer, Runnable onReload) {
        this(address, connectTimeoutMs, writeTimeoutNanos, timer, onReload, Start.NOW);
    }

    /** How a connection is first made. */
    enum Start {
        /** At once, or the constructor throws. */
        NOW,
        /**
         * At once; if Redis cannot be reached ({@link Unreachable}), by the reading thread, as a connection lost is,
         * every call failing at once meanwhile, saying why the last attempt failed. Any other failure throws.
         */
        TRY_NOW,
        /** By the reading thread alone: another connection to the same address has just found Redis unreachable. */
        BACKGROUND
    }

    /** As above, first connected as {@code start} says. */
    ScriptConnection(Address address, int connectTimeoutMs, long writeTimeoutNanos, Timer timer, Runnable onReload,
                     Start start) {
        this.address = address;
        this.connectTimeoutMs = connectTimeoutMs;
        this.writeTimeoutNanos = writeTimeoutNanos;
        this.silentLimitMs = (int) Math.min(Integer.MAX_VALUE,
                Math.max(SILENT_LIMIT_LEAST_MS, SILENT_LIMIT_TIMEOUTS * TimeUnit.NANOSECONDS.toMillis(writeTimeoutNanos)));
        this.timer = timer;
        this.onReload = onReload;
        Link first = null;
        if (start != Start.BACKGROUND) {
            try {
                first = open();
            } catch (IOException e) {
                if (start == Start.NOW || !(e instanceof Unreachable)) {
                    throw new RedisConnectionException("Unable to connect to " + address + ": " + e.getMessage(), e);
                }
                unreachable = String.valueOf(e.getMessage());
            }
        }
        this.link = first;
        this.everConnected = first != null;
        this.reader = new ReadingThread(this::read, "sluice-redis-" + address);
        reader.setDaemon(true);
        reader.start();
    }

    private Link open() throws IOException {
        Socket socket = new Socket();
        try {
            socket.setTcpNoDelay(true);
            // through Sentinel, the primary is looked up at each connection: after a failover, the one promoted
            InetSocketAddress located = address.sentinels() == null ? null : address.sentinels().locate(connectTimeoutMs, timer);
            String host = located == null ? address.host() : located.getHostString();
            int port = located == null ? address.port() : located.getPort();
            try {
                socket.connect(new InetSocketAddress(host, port), connectTimeoutMs);
            } catch (java.net.UnknownHostException e) { // whose message is the host alone
                throw new Unreachable("unknown host " + host, null);
            } catch (IOException e) { // refused, no route, no answer in time
                throw new Unreachable(e.getMessage(), e);
            }
            socket.setSoTimeout(connectTimeoutMs); // for the introduction only
            // and the whole of it within that too, or the store's start waits as long as a slow server likes
            try (SocketDeadline deadline = new SocketDeadline(socket, connectTimeoutMs, timer)) {
                try {
                    Link opened = introduced(socket, host, port);
                    deadline.met();
                    return opened;
                } catch (IOException e) {
                    IOException explained = deadline.explain(e, "no introduction within " + connectTimeoutMs + " ms"
                            + (address.tls() != null ? " (TLS handshake, then " : " (") + "AUTH, SELECT, PING)");
                    if (e instanceof Refused && explained == e) {
                        throw e; // Redis answered: not a matter of reaching it
                    }
                    // silent past the deadline, or gone halfway (a Redis stopping, starting): not reached
                    throw new Unreachable(explained.getMessage(), explained == e ? e : null);
                }
            }
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    /** The connection made over {@code socket}, introduced as {@link #address} says. */
    private Link introduced(Socket socket, String host, int port) throws IOException {
        Link opened = new Link(socket, address.tls() == null ? socket : secured(address.tls(), socket, host, port));
        if (address.password() != null) {
            introduce(opened, address.user() == null ? new String[] {"AUTH", address.password()}
                    : new String[] {"AUTH", address.user(), address.password()});
        }
        if (address.database() != 0) {
            introduce(opened, new String[] {"SELECT", Integer.toString(address.database())});
        }
        if (address.clientName() != null) {
            introduce(opened, new String[] {"CLIENT", "SETNAME", address.clientName()});
        }
        // a server that accepts and then refuses (maxclients, protected mode) answers this with its error
        introduce(opened, new String[] {"PING"});
        socket.setSoTimeout(silentLimitMs); // see silentLimitMs
        return opened;
    }

    /**
     * TLS over {@code socket} ({@code rediss://}, and a {@code rediss-sentinel://}'s sentinels): the handshake done,
     * and the certificate checked against the host as written in the address (or named by the sentinels), as an
     * HTTPS client checks it (a name, or an IP address in its subject alternative names).
     *
     * @throws IOException a {@link Refused} if the handshake fails: the certificate is a matter of the address and
     *                     its trust, not of reaching Redis
     */
    static Socket secured(SSLSocketFactory sockets, Socket socket, String host, int port) throws IOException {
        SSLSocket tls = (SSLSocket) sockets.createSocket(socket, host, port, true);
        SSLParameters parameters = tls.getSSLParameters();
        parameters.setEndpointIdentificationAlgorithm("HTTPS");
        tls.setSSLParameters(parameters);
        try {
            tls.startHandshake();
        } catch (javax.net.ssl.SSLException e) {
            // no cause: its root would be shown instead (TlsTrust says); refused, as the certificate is a matter of
            // the address and its trust, not of reaching Redis
            throw new Refused(TlsTrust.refusal(e));
        }
        return tls;
    }

    private void introduce(Link opened, String[] command) throws IOException {
        RespWriter encoding = new RespWriter();
        encoding.command(command, null, null);
        encoding.writeTo(opened.out);
        Object answer = opened.in.read();
        if (answer instanceof RespReader.Error error) {
            throw new Refused(command[0] + " refused: " + error.message());
        }
    }

    /**
     * A connection that could not be made because Redis could not be reached: refused, no route, an unknown host, no
     * answer in time, closed halfway through the introduction (for Sentinel: no sentinel reached). Only such a failure
     * is left to the reading thread to retry when the store connects in the background; a Redis that answered
     * (a password refused, a database out of range, a certificate not trusted, a primary no sentinel knows) is a
     * mistake of the address, told at once (a review found a wrong password taken for "not reachable now").
     */
    static final class Unreachable extends IOException {
        Unreachable(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * An introduction Redis answered with an error ({@code AUTH}, {@code SELECT}, {@code PING} refused), or a TLS
     * handshake that failed.
     */
    static final class Refused extends IOException {
        Refused(String message) {
            super(message);
        }
    }

    /** Whether the connection is made now (not lost, not yet made). */
    boolean connected() {
        synchronized (lock) {
            return link != null;
        }
    }

    /** Whether the connection has been made at least once: Redis has been reached. */
    boolean everConnected() {
        return everConnected;
    }

    /**
     * Calls the script whose SHA-1 is {@code sha} ({@code EVALSHA}), or its {@code text} if Redis does not know
     * it. The answer is completed on this connection's reading thread, or at once, failed, while the connection
     * is lost.
     */
    CompletableFuture<String> evaluate(String sha, String text, String[] keys, String[] arguments) {
        Pending call = new Pending(new CompletableFuture<>(), text, keys, arguments, false);
        send(call, sha);
        return call.answer();
    }

    /**
     * Sends a command that is not a script ({@code DEL key}, say): its answer, a string or an integer as text,
     * completed as {@link #evaluate}'s is.
     */
    CompletableFuture<String> command(String... words) {
        Pending call = new Pending(new CompletableFuture<>(), null, null, words, false);
        send(call, null);
        return call.answer();
    }

    private void send(Pending call, String shaOrNull) {
        synchronized (lock) {
            if (link != null) {
                String[] head = !call.script() ? NO_WORDS
                        : call.withText() ? new String[] {"EVAL", call.text(), Integer.toString(call.keys().length)}
                        : new String[] {"EVALSHA", shaOrNull, Integer.toString(call.keys().length)};
                writer.command(head, call.keys(), call.arguments());
                writingSince = System.nanoTime();
                writingTo = link;
                try {
                    watchWriting();
                    writer.writeTo(link.out);
                } catch (IOException e) {
                    // in line all the same: the reading thread, woken below, finds the socket closed, fails the
                    // line with it and connects again (a bug a review found: failed here, with nothing in line, the
                    // thread stayed parked and the connection dead for good)
                    closeQuietly(link.socket);
                } finally {
                    writingTo = null;
                }
                line.add(call);
                if (idle) {
                    idle = false;
                    LockSupport.unpark(reader);
                }
                if (writer.capacity() > RespWriter.KEPT) {
                    writer = new RespWriter(); // a very large call does not keep its buffer for good
                }
                return;
            }
        }
        // outside the lock: failing runs what waits on the answer (a review found the lock held around it)
        call.answer().completeExceptionally(new RedisConnectionException(closed ? "connection to " + address
                + " closed" : "not connected to " + address + " (connecting again" + (unreachable == null ? ")"
                : "; the last attempt: " + unreachable + ")")));
    }

    /**
     * Sets the watch on writes, unless one is set. A write blocks once Redis stops reading (asleep, stopped, cut
     * off) and its buffers and the socket's are full; it blocks under the lock, and with it every caller of this
     * connection, a server's event loop among them, for as long as Redis does not read: past any timeout. So a
     * write blocked {@link #writeTimeoutNanos} ends the connection, as a lost one: the write fails, the calls in
     * line fail, the callers go on, and the reading thread connects again.
     *
     * <p>The watch is set when a write starts and none is set, and fires a write timeout later; it looks again
     * at a write still going on when its timeout is due, so a busy connection sets about one a timeout, and an idle
     * one none. A write past its timeout is looked at once more {@link #SECOND_LOOK_NANOS} later before the
     * connection is ended.
     */
    private void watchWriting() {
        if (!watching.get() && watching.compareAndSet(false, true)) {
            try {
                timer.newTimeout(this::lookAtWriting, writeTimeoutNanos, TimeUnit.NANOSECONDS);
            } catch (IllegalStateException stopped) { // the store is closing: the write goes unwatched
                watching.set(false);
            }
        }
    }

    private void lookAtWriting(Timeout timeout) {
        Link writing = writingTo;
        long since = writingSince;
        long blocked = System.nanoTime() - since;
        if (writing != null && !closed) {
            if (blocked < writeTimeoutNanos) { // a write started since: watched until its own timeout
                timer.newTimeout(this::lookAtWriting, writeTimeoutNanos - blocked, TimeUnit.NANOSECONDS);
                return;
            }
            if (since != overdue) {
                // past its timeout at a first look: looked at once more a moment later, so that a write the JVM
                // held past it (a pause of the collector: the write done, the writer not yet run again) is not
                // taken for Redis not reading (a case a review found)
                overdue = since;
                timer.newTimeout(this::lookAtWriting, SECOND_LOOK_NANOS, TimeUnit.NANOSECONDS);
                return;
            }
            endedFor = "a write blocked for " + TimeUnit.NANOSECONDS.toMillis(blocked) + " ms (Redis is not"
                    + " reading)";
            closeQuietly(writing.socket); // the write throws, and the reading thread's read
        }
        watching.set(false);
        if (writingTo != null && !closed) { // still writing, or writing again since the look above
            watchWriting();
        }
    }

    /**
     * Runs {@code task} on the reading thread if it is parked (nothing in line, nothing handed), and wakes it.
     *
     * @throws RejectedExecutionException if the thread is busy, or the connection lost or closed: the caller runs
     *         the task itself
     */
    @Override
    public void execute(Runnable task) {
        synchronized (lock) {
            if (!idle || link == null || closed) {
                throw new RejectedExecutionException("the reading thread is busy");
            }
            handed.add(task);
            idle = false;
        }
        LockSupport.unpark(reader);
    }

    /** The reading thread: answers the calls in line as their answers come, and connects again when lost. */
    private void read() {
        long retryNanos = FIRST_RETRY_NANOS;
        while (!closed) {
            Link current;
            synchronized (lock) {
                current = link;
            }
            if (current == null) {
                Runnable task;
                while ((task = takeHanded()) != null) {
                    runHanded(task); // sends nothing while lost: its decisions fail at once
                }
                try {
                    TimeUnit.NANOSECONDS.sleep(retryNanos);
                } catch (InterruptedException e) {
                    continue; // closing
                }
                retryNanos = Math.min(retryNanos * 2, LAST_RETRY_NANOS);
                try {
                    Link opened = open();
                    synchronized (lock) {
                        if (closed) {
                            closeQuietly(opened.socket);
                        } else {
                            link = opened;
                            everConnected = true;
                            retryNanos = FIRST_RETRY_NANOS;
                            unreachable = null;
                        }
                    }
                } catch (Throwable e) {
                    // why, for the calls failed meanwhile: a certificate refused, say, said nowhere else (a review)
                    unreachable = String.valueOf(e.getMessage());
                    // still down: the next attempt after a longer wait (an Error too, as below: a reading thread that
                    // died here would leave the connection lost for good, every call on it refused)
                }
                continue;
            }
            try {
                while (!closed) {
                    Runnable task;
                    synchronized (lock) {
                        task = handed.poll();
                        if (task == null && line.isEmpty()) {
                            idle = true;
                        }
                    }
                    if (task != null) {
                        runHanded(task);
                    } else if (idleUntilWoken()) {
                        Object answer;
                        try {
                            answer = current.in.read();
                        } catch (SocketTimeoutException silent) {
                            throw new IOException("no answer for " + silentLimitMs + " ms while calls waited (Redis gone"
                                    + " without closing the connection, or hung)", silent);
                        }
                        Pending call;
                        synchronized (lock) {
                            call = line.poll();
                        }
                        if (call == null) {
                            throw new IOException("an answer to no call: " + answer);
                        }
                        answer(call, answer);
                        if (answer instanceof RespReader.Error error && demoted(error.message())) {
                            endedFor = "Redis answered " + error.message() + "; connecting again, to whatever the"
                                    + " address names now";
                            throw new IOException(error.message());
                        }
                    }
                }
            } catch (Throwable e) { // an Error too: a reading thread that died would leave the line unanswered
                lost(current, e);
            }
        }
    }

    /**
     * Parks while {@link #idle}; true if there is an answer to read now (the thread was not idle, or a call was
     * written meanwhile), false to look again (woken for a handed call, or closing). Every second of idleness it
     * sends a {@code PING}, in line as any call, its answer read as theirs. Redis's {@code timeout} counts from a
     * client's last command, so it never closes this connection as idle: before, it did, and the calls written in
     * the second before the next look each failed, decided by the failure policy. A Redis that closed the
     * connection otherwise ({@code CLIENT KILL}, a restart) is found by the PING, and the connection made again
     * before a call fails on it; one that holds it and answers nothing, by the PING's silence
     * ({@link #silentLimitMs}).
     */
    private boolean idleUntilWoken() {
        while (true) {
            synchronized (lock) {
                if (!idle) {
                    return !line.isEmpty() && handed.isEmpty();
                }
                if (closed) {
                    return false;
                }
            }
            long parked = System.nanoTime();
            LockSupport.parkNanos(this, IDLE_CHECK_NANOS);
            // an interrupt is only ever closing's (seen above as closed) or a stray one from code run here (a
            // caller's continuation): left set, every later park would return at once and this thread would spin
            Thread.interrupted();
            if (System.nanoTime() - parked < IDLE_CHECK_NANOS) {
                continue; // woken, or early: look again
            }
            synchronized (lock) {
                if (!idle || closed) {
                    continue;
                }
                idle = false;
            }
            send(new Pending(new CompletableFuture<>(), null, null, PING, false), null); // its answer waited for above
        }
    }

    private Runnable takeHanded() {
        synchronized (lock) {
            return handed.poll();
        }
    }

    /** A handed call is the batcher's to guard; whatever escapes it must not stop this thread's reading. */
    private static void runHanded(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException | Error e) {
            Thread thread = Thread.currentThread();
            thread.getUncaughtExceptionHandler().uncaughtException(thread, e);
        }
    }

    /**
     * Whether an error says that the node is no primary now ({@code READONLY}, from a command or from a script's
     * write; {@code MASTERDOWN}): the connection is made again, so that an address that names the primary (a DNS
     * name a failover moves) is looked up again. A review demoted the primary in place: every decision failed with
     * {@code READONLY} for as long as the run lasted, on a connection that was never left.
     */
    static boolean demoted(String message) {
        return message.startsWith("READONLY") || message.startsWith("MASTERDOWN") || message.contains("-READONLY ");
    }

    private void answer(Pending call, Object answer) {
        if (answer instanceof RespReader.Error error) {
            if (call.script() && !call.withText() && error.message().startsWith("NOSCRIPT")) {
                onReload.run();
                send(new Pending(call.answer(), call.text(), call.keys(), call.arguments(), true), null);
                return;
            }
            call.answer().completeExceptionally(new RedisCommandExecutionException(error.message()));
        } else if (answer instanceof String value) {
            call.answer().complete(value);
        } else if (answer == null) {
            call.answer().complete(null);
        } else if (answer instanceof Long number && !call.script()) {
            call.answer().complete(number.toString());
        } else {
            call.answer().completeExceptionally(new RedisCommandExecutionException("expected a string from "
                    + (call.script() ? "the script" : call.arguments()[0]) + ", got " + answer));
        }
    }

    /** Fails every call in line: their answers will not come. */
    private void lost(Link current, Throwable cause) {
        List<Pending> failed;
        synchronized (lock) {
            if (current != null && link == current) {
                link = null;
            }
            failed = new ArrayList<>(line);
            line.clear();
        }
        if (current != null) {
            closeQuietly(current.socket);
        }
        String ended = endedFor;
        endedFor = null;
        RedisConnectionException failure = new RedisConnectionException(closed ? "connection to " + address
                + " closed" : "connection to " + address + " lost: " + (ended != null ? ended : cause.getMessage()),
                cause);
        for (Pending call : failed) {
            call.answer().completeExceptionally(failure);
        }
    }

    /** Closes the socket; every call still in line fails, and no other is sent. */
    @Override
    public void close() {
        Link current;
        synchronized (lock) {
            closed = true;
            current = link;
            link = null;
        }
        if (current != null) {
            closeQuietly(current.socket);
        }
        reader.interrupt(); // ends its wait between attempts; it ends by itself, not waited for here (it may be
                            // connecting, up to the connect timeout, and a store closes its connections in a row)
        lost(null, new IOException("closed")); // what the reading thread did not fail on its way out
        Runnable task;
        while ((task = takeHanded()) != null) {
            runHanded(task); // sends nothing once closed: its decisions fail at once, as closed
        }
    }

    /** A connection's reading thread: where the callers' continuations run. */
    private static final class ReadingThread extends Thread {
        ReadingThread(Runnable read, String name) {
            super(read, name);
        }
    }

    /** Whether {@code thread} reads a connection, this one or another, of any store. */
    static boolean reads(Thread thread) {
        return thread instanceof ReadingThread;
    }

    /** The reading thread, for tests: it ends once the connection is closed. */
    Thread reader() {
        return reader;
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing: nothing to do about it
        }
    }
}
