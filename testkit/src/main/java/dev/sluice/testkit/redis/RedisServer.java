package dev.sluice.testkit.redis;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A real {@code redis-server} process on a free loopback port, for tests: {@code redis-server} from the PATH
 * if there is one, otherwise the Linux binary inside {@code com.github.codemonstur:embedded-redis} from
 * Maven Central, so a machine with only a JDK runs every Redis test. No persistence; the process is killed as
 * the test JVM exits if the test forgot to stop it, or failed before it could (a review found them left running).
 * Its working directory (its log, a Cluster node's {@code nodes.conf}) is deleted as it is closed, or as the JVM
 * exits: one test run had left some 150 such directories behind.
 *
 * <p>{@link #kill()} and {@link #restart()} let fault tests take Redis away and bring it back on the same port.
 */
public final class RedisServer implements AutoCloseable {
    private static final String EMBEDDED = "redis-server-6.2.6-v5-linux-amd64";
    /** How much higher than its port a Cluster node listens for the other nodes. */
    private static final int BUS_OFFSET = 10_000;
    /** How often {@link #start} tries another port when the one it found free was taken meanwhile. */
    private static final int PORT_ATTEMPTS = 5;
    /** What redis-server logs when a port it must listen on is taken. */
    private static final String PORT_TAKEN = "Address already in use";
    private static Path binary;
    /** Every server made and not yet closed: killed, and its directory deleted, by one hook as the JVM exits. */
    private static final java.util.Set<RedisServer> OPEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> OPEN.forEach(RedisServer::closeQuietly),
                "sluice-redis-reaper"));
    }

    private final int port;
    private final List<String> extra;
    private final Path dir;
    private Process process;

    private RedisServer(int port, List<String> extra) throws IOException {
        this.port = port;
        this.extra = extra;
        this.dir = Files.createTempDirectory("sluice-redis-" + port + "-");
        OPEN.add(this);
    }

    /**
     * Starts a Redis on a free port (a node of a Cluster with {@code --cluster-enabled yes}, whose bus port, 10,000
     * higher, must be free too). A port taken between finding it free and Redis binding it (by a client's connection,
     * whose ports the kernel picks from the same range) is tried again with another, a few times: a test run saw a
     * Cluster node's bus port taken so.
     */
    public static RedisServer start(String... extraArguments) throws IOException {
        boolean cluster = List.of(extraArguments).contains("--cluster-enabled");
        for (int attempt = 1; ; attempt++) {
            List<String> arguments = new ArrayList<>(List.of(extraArguments));
            int tls = arguments.indexOf("--tls-port");
            if (tls >= 0 && arguments.get(tls + 1).equals(FREE_TLS_PORT)) {
                // picked again at each attempt, as the plain port is, and for a Cluster node with its bus (10,000
                // above the TLS port then) free too: a TLS port picked once had both taken by chance for good
                arguments.set(tls + 1, Integer.toString(freePort(cluster)));
            }
            int sentinelTls = arguments.indexOf(TLS_PORT_LINE + FREE_TLS_PORT); // a Sentinel's, a line of its file
            if (sentinelTls >= 0) {
                arguments.set(sentinelTls, TLS_PORT_LINE + freePort(false));
            }
            RedisServer server = new RedisServer(freePort(cluster), List.copyOf(arguments));
            try {
                server.launch();
                return server;
            } catch (IOException e) {
                server.closeQuietly();
                if (attempt == PORT_ATTEMPTS || e.getMessage() == null || !e.getMessage().contains(PORT_TAKEN)) {
                    throw e;
                }
            }
        }
    }

    /**
     * Starts a Redis that speaks TLS on a port of its own ({@link #tlsUri()}), with {@code certificate}, beside its
     * plain port, which the test itself uses to look at it. Clients show no certificate.
     */
    public static RedisServer startTls(SelfSignedCertificate certificate) throws IOException {
        return start("--tls-port", FREE_TLS_PORT, "--tls-cert-file", certificate.certificate().toString(),
                "--tls-key-file", certificate.key().toString(), "--tls-auth-clients", "no");
    }

    /**
     * Starts a replica of {@code primary} (itself {@link #startTls started with TLS}) that speaks TLS as
     * {@link #startTls} does and replicates over TLS ({@code tls-replication yes}, trusting {@code certificate}), so that
     * it names its TLS port to the primary, and so to the sentinels that ask the primary of its replicas.
     */
    public static RedisServer startTlsReplica(SelfSignedCertificate certificate, RedisServer primary) throws IOException {
        return start("--tls-port", FREE_TLS_PORT, "--tls-cert-file", certificate.certificate().toString(),
                "--tls-key-file", certificate.key().toString(), "--tls-auth-clients", "no",
                "--tls-ca-cert-file", certificate.certificate().toString(), "--tls-replication", "yes",
                "--replicaof", "127.0.0.1", Integer.toString(primary.tlsPort()));
    }

    /** The value of {@code --tls-port} given to {@link #start} for a free port of its choosing, one per attempt. */
    static final String FREE_TLS_PORT = "free";

    public int port() {
        return port;
    }

    /** {@code rediss://127.0.0.1:PORT}, the TLS port of a server {@link #startTls started} so. */
    public String tlsUri() {
        return "rediss://127.0.0.1:" + tlsPort();
    }

    /** The port this server speaks TLS on (a Cluster node's bus is 10,000 above it then). */
    public int tlsPort() {
        int at = extra.indexOf("--tls-port");
        if (at >= 0) {
            return Integer.parseInt(extra.get(at + 1));
        }
        return extra.stream().filter(line -> line.startsWith(TLS_PORT_LINE)).findFirst()
                .map(line -> Integer.parseInt(line.substring(TLS_PORT_LINE.length())))
                .orElseThrow(() -> new IllegalStateException("this Redis speaks no TLS: start it with startTls"));
    }

    /** A Sentinel's line of sentinel.conf for its TLS port. */
    private static final String TLS_PORT_LINE = "tls-port ";

    /** {@code redis://127.0.0.1:PORT}. */
    public String uri() {
        return "redis://127.0.0.1:" + port;
    }

    /** A fresh connection to this server. */
    public Resp connect() throws IOException {
        return new Resp("127.0.0.1", port, 5_000);
    }

    /** The first of {@link #extra} for a Sentinel: its configuration lines follow. */
    private static final String SENTINEL = "sentinel";

    /**
     * Starts a Redis Sentinel on a free port that watches {@code primary} under {@code name}, with a quorum of
     * {@code quorum}: the primary is taken for down after a second without an answer, and a replica promoted; with
     * {@code lines} of sentinel.conf more ({@code requirepass ...}, {@code sentinel auth-pass ...}).
     */
    public static RedisServer startSentinel(String name, RedisServer primary, int quorum, String... lines)
            throws IOException {
        List<String> configuration = new ArrayList<>(List.of(SENTINEL,
                "sentinel monitor " + name + " 127.0.0.1 " + primary.port() + " " + quorum,
                "sentinel down-after-milliseconds " + name + " 1000", "sentinel failover-timeout " + name + " 3000",
                "sentinel parallel-syncs " + name + " 1"));
        configuration.addAll(List.of(lines));
        return start(configuration.toArray(String[]::new));
    }

    /**
     * Starts a Redis Sentinel as {@link #startSentinel} does, for a {@code primary} {@link #startTls started with TLS}:
     * it watches the primary's TLS port, over TLS ({@code tls-replication yes}, so it names that port to those who
     * ask), and speaks TLS itself on a port of its own ({@link #tlsPort()}) with {@code certificate}, beside its plain
     * port, which the test uses to look at it. Clients show no certificate.
     */
    public static RedisServer startTlsSentinel(String name, RedisServer primary, int quorum,
                                               SelfSignedCertificate certificate, String... lines) throws IOException {
        List<String> configuration = new ArrayList<>(List.of(SENTINEL,
                "sentinel monitor " + name + " 127.0.0.1 " + primary.tlsPort() + " " + quorum,
                "sentinel down-after-milliseconds " + name + " 1000", "sentinel failover-timeout " + name + " 3000",
                "sentinel parallel-syncs " + name + " 1", TLS_PORT_LINE + FREE_TLS_PORT, "tls-replication yes",
                "tls-cert-file " + certificate.certificate(), "tls-key-file " + certificate.key(),
                "tls-ca-cert-file " + certificate.certificate(), "tls-auth-clients no"));
        configuration.addAll(List.of(lines));
        return start(configuration.toArray(String[]::new));
    }

    private void launch() throws IOException {
        List<String> command;
        if (!extra.isEmpty() && extra.get(0).equals(SENTINEL)) {
            // a Sentinel needs a file of its own, which it rewrites with what it learns
            Path file = dir.resolve("sentinel.conf");
            Files.writeString(file, "port " + port + "\nbind 127.0.0.1\nprotected-mode no\ndir " + dir + "\n"
                    + String.join("\n", extra.subList(1, extra.size())) + "\n");
            command = List.of(binary().toString(), file.toString(), "--sentinel");
        } else {
            command = new ArrayList<>(List.of(binary().toString(), "--port", Integer.toString(port),
                    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.toString(),
                    "--protected-mode", "no"));
            if (majorVersion() >= 7) {
                // DEBUG SLEEP and DEBUG SET-ACTIVE-EXPIRE are how tests make Redis hang and hold keys; from Redis 7 they
                // are refused unless enabled (a redis-server 7 on the PATH failed every such test: a machine's own
                // Redis is taken before the embedded 6.2)
                command.addAll(List.of("--enable-debug-command", "yes"));
            }
            command.addAll(extra);
        }
        process = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(dir.resolve("redis.log").toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (true) {
            try (Resp resp = connect()) {
                if ("PONG".equals(resp.call("PING"))) {
                    return;
                }
            } catch (IOException notYet) {
                if (notYet instanceof Resp.RespError error && error.getMessage().startsWith("NOAUTH")) {
                    return; // up, with a password (a Sentinel's requirepass, given in its lines)
                }
                if (!process.isAlive()) {
                    throw new IOException("redis-server exited with status " + process.exitValue() + ": "
                            + Files.readString(dir.resolve("redis.log")));
                }
                if (System.nanoTime() > deadline) {
                    process.destroyForcibly();
                    throw new IOException("redis-server did not answer on port " + port + " within 15 s", notYet);
                }
                sleep(20);
            }
        }
    }

    /**
     * Makes this server answer no one for {@code seconds} ({@code DEBUG SLEEP}, fractions allowed), from a thread of
     * its own: the stage completes with Redis's answer once it answers again, or with the exception that ended the
     * call (as its value: a test looks at it, or not).
     */
    public CompletableFuture<Object> sleep(String seconds) {
        CompletableFuture<Object> answered = new CompletableFuture<>();
        Thread sleeper = new Thread(() -> {
            try (Resp resp = connect()) {
                answered.complete(resp.call("DEBUG", "SLEEP", seconds));
            } catch (Exception e) {
                answered.complete(e);
            }
        }, "redis-sleep-" + port);
        sleeper.setDaemon(true);
        sleeper.start();
        return answered;
    }

    /**
     * Waits until this server hangs ({@link #sleep}): a {@code PING} on a fresh connection goes unanswered for
     * 100 ms. A fixed sleep after sending {@code DEBUG SLEEP} was a guess a slow machine could lose: the call under
     * test then reached Redis first.
     *
     * @throws IllegalStateException if it still answers after 10 s
     */
    public void awaitHanging() throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try (Resp resp = new Resp("127.0.0.1", port, 100)) {
                resp.call("PING");
            } catch (java.net.SocketTimeoutException hanging) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("redis-server on port " + port + " still answers after 10 s");
            }
            Thread.sleep(20);
        }
    }

    /** Kills the process at once (SIGKILL), as a crash would. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /** Starts the process again on the same port (empty: nothing is persisted). */
    public void restart() throws IOException {
        if (process.isAlive()) {
            throw new IllegalStateException("redis-server on port " + port + " is still running");
        }
        launch();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** The last {@code lines} lines of this server's log, to explain a failed test. */
    public String logTail(int lines) {
        try {
            List<String> all = Files.readAllLines(dir.resolve("redis.log"));
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException e) {
            return "(log unreadable: " + e.getMessage() + ")";
        }
    }

    /** Kills the process and deletes its directory; {@link #restart()} cannot follow. */
    @Override
    public void close() throws InterruptedException {
        if (process != null) {
            kill();
        }
        OPEN.remove(this);
        deleteDirectory();
    }

    /** The directory this server writes its log and any Cluster state to; gone once it is closed. */
    Path directory() {
        return dir;
    }

    private void closeQuietly() {
        try {
            close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void deleteDirectory() {
        try (java.util.stream.Stream<Path> files = Files.list(dir)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                Files.deleteIfExists(file);
            }
            Files.deleteIfExists(dir);
        } catch (IOException gone) {
            // deleted already, or never to be: a temporary directory left behind harms no test
        }
    }

    private static int majorVersion = -1;

    /** The major version of {@link #binary()}, from {@code redis-server --version} ({@code Redis server v=7.0.15 ...}). */
    static synchronized int majorVersion() throws IOException {
        if (majorVersion < 0) {
            Process version = new ProcessBuilder(binary().toString(), "--version").redirectErrorStream(true).start();
            String said = new String(version.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            java.util.regex.Matcher found = java.util.regex.Pattern.compile("v=(\\d+)\\.").matcher(said);
            if (!found.find()) {
                throw new IOException(binary() + " --version said no version: " + said);
            }
            majorVersion = Integer.parseInt(found.group(1));
        }
        return majorVersion;
    }

    /** The redis-server to run: from the PATH, or extracted once from the embedded-redis jar. */
    static synchronized Path binary() throws IOException {
        if (binary != null) {
            return binary;
        }
        for (String entry : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            Path candidate = Path.of(entry, "redis-server");
            if (Files.isExecutable(candidate)) {
                return binary = candidate;
            }
        }
        String os = System.getProperty("os.name").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new IOException("no redis-server on the PATH, and the embedded one is for Linux x86-64 only ("
                    + os + " " + arch + " here): install Redis");
        }
        try (InputStream embedded = RedisServer.class.getClassLoader().getResourceAsStream(EMBEDDED)) {
            if (embedded == null) {
                throw new IOException(EMBEDDED + " is missing from the classpath (com.github.codemonstur:embedded-redis)");
            }
            Path extracted = Files.createTempFile("sluice-redis-server-", "");
            Files.copy(embedded, extracted, StandardCopyOption.REPLACE_EXISTING);
            if (!extracted.toFile().setExecutable(true) || !Files.isExecutable(extracted)) {
                throw new IOException("cannot make " + extracted + " executable (a temporary directory mounted noexec?):"
                        + " set java.io.tmpdir to another, or install redis-server on the PATH");
            }
            extracted.toFile().deleteOnExit();
            return binary = extracted;
        }
    }

    /**
     * A free port below the range the kernel hands out to clients' connections (32768 and up on Linux), so that
     * none of them takes it while the server is down for a {@link #restart()} (a review found restarts that could
     * lose their port so), nor, for a Cluster node, its bus port 10,000 higher; one of that range if none is free.
     */
    static int freePort() throws IOException {
        java.util.concurrent.ThreadLocalRandom random = java.util.concurrent.ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 50; attempt++) {
            int port = LOWEST_PORT + random.nextInt(PORTS);
            try (ServerSocket socket = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress())) {
                return socket.getLocalPort();
            } catch (IOException taken) {
                // another
            }
        }
        try (ServerSocket socket = new ServerSocket(0)) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }

    /** The ports {@link #freePort()} picks from: 20000 to 22767, their bus ports below 32768. */
    private static final int LOWEST_PORT = 20_000;
    private static final int PORTS = 2_768;

    /** A free port; for a Cluster node, one whose bus port ({@link #BUS_OFFSET} higher) is free as well. */
    private static int freePort(boolean cluster) throws IOException {
        while (true) {
            int port = freePort();
            if (!cluster) {
                return port;
            }
            if (port + BUS_OFFSET <= 65_535) {
                try (ServerSocket bus = new ServerSocket(port + BUS_OFFSET)) {
                    return port;
                } catch (IOException taken) {
                    // another
                }
            }
        }
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UncheckedIOException(new IOException("interrupted while waiting for Redis", e));
        }
    }
}
