package dev.sluice.server;

import dev.sluice.redis.RedisStore;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.config.Sha256;
import dev.sluice.server.config.TextFile;
import dev.sluice.server.metrics.ServerMetrics;
import dev.sluice.store.InMemoryStore;
import dev.sluice.store.Store;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * The configuration in force and the store under it, kept up to date with the file it came from.
 *
 * <p>{@link #reload()} reads the file again; a changed file that checks out becomes the {@link Policies} in
 * force at once (requests already being decided finish under the old one), on the same store unless the
 * store's settings changed. Counters survive for every policy whose algorithm, limits and key are unchanged (see
 * {@link Policies}). A file that does not check out changes nothing: its message (file, line, field) goes to
 * the log and {@code sluice_config_reloads_total{result="failure"}} counts it, once (a file that cannot be read
 * is, too, until it can). An edit whose store cannot be reached is refused the same way but tried again at
 * every look, quietly, and applied once the store answers: a Redis still starting must not leave the edit
 * waiting for someone to touch the file. {@link #watch} reloads every
 * so often; polling the file's text rather than waiting for file-system events also catches editors that
 * replace the file and configurations mounted through symbolic links. The files of {@code envoy_configs} are
 * watched alike, the names in their directories included.
 *
 * <p>The watcher applies an edit only once two looks in a row, one period apart, have seen the same text in every
 * file: a file looked at while it is being written must not come into force half written (a review found the first
 * of a file's two policies applied alone, the second answering 404, and through the gateway its route not limited,
 * until the rest came). A writer that stops for longer than a period halfway is not told from one that has finished:
 * docs/server.md asks for the file to be written whole and renamed into place.
 */
public final class LiveConfig implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("sluice");
    /**
     * How long a replaced store is kept open at least, past its store_timeout: a request that took the policies just
     * before the reload may not have counted itself yet ({@link #retire}). Package-private for tests.
     */
    static volatile Duration oldStoreGrace = Duration.ofSeconds(5);
    /**
     * The longest a replaced store is kept open for the decisions still under way on it, past its grace: a call of
     * Envoy's of 10,000 descriptors, each waiting out its store_timeout, takes that long at 60 ms each.
     */
    static final Duration OLD_STORE_LONGEST = Duration.ofMinutes(10);
    /** How long {@link #close} waits for a replaced store being closed: Lettuce's shutdowns take up to 2 s each. */
    private static final Duration RETIRED_CLOSE_LONGEST = Duration.ofSeconds(10);
    /** Closes a replaced store. Package-private for tests, which see when it is called and how long it takes. */
    static volatile Consumer<Store> closing = LiveConfig::close;

    private final Path file;
    /** What messages call the configuration with the line of a field after it: its file, its resource; else null. */
    private String name;
    private final ServerMetrics metrics;
    /** The client connections of every server this configuration is given to. */
    private final ClientConnections connections = new ClientConnections();
    private volatile Policies policies;
    private volatile Store store;
    /** Whether {@link #store} is the caller's ({@link #of(ServerConfig, Store, ServerMetrics)}): kept, never closed. */
    private boolean storeGiven;
    private String storeSettings;
    /** The store_timeout of the store in use: how long its decisions may still wait once it is replaced. */
    private long storeTimeoutNanos;
    /** The decisions under way on {@link #store}, counted by every {@link Policies} made on it. */
    private LongAdder storeDeciding = new LongAdder();
    /**
     * The stores replaced and not closed yet, each with its count of decisions under way; closed by {@link #close}
     * at once. Guarded by itself.
     */
    private final Map<Store, LongAdder> retiring = new java.util.IdentityHashMap<>();
    /** Looks at the stores {@link #retiring}: made with the first, stopped by {@link #close}. Guarded by retiring. */
    private ScheduledExecutorService retirer;
    private String text;
    /** The text of the configuration in force (not of a refused edit, as {@link #text} may be). */
    private String applied;
    /** The message of the read that failed at the last look: a file gone or unreadable is reported once. */
    private String unreadable;
    /** A text that checked out but whose store could not be reached: tried again at every look until it is. */
    private String unreached;
    /**
     * What the files the configuration reads besides itself held as they were last read, as {@link #text} is for the
     * file itself: those of {@code envoy_configs}, and that of {@code store_trust} ({@link #otherFiles}).
     */
    private Map<Path, String> otherFiles = Map.of();
    private ScheduledExecutorService watcher;
    /**
     * How often an in-memory store the server opened drops its expired keys. The store drops them only when it is
     * crowded, so after a burst of new keys {@code sluice_store_keys} stayed near {@code max_keys} for good, and the
     * alert on a nearly full store with it, with two keys alive (a review found it). Package-private for tests.
     */
    static volatile Duration sweepPeriod = Duration.ofSeconds(10);
    private ScheduledExecutorService sweeper;
    /** The stores of the policies that have one of their own, kept across reloads. */
    private final OwnStores ownStores = new OwnStores();
    /** Once closed, reloads do nothing. Guarded by this. */
    private boolean closed;
    /** What the watcher saw at its last look, to apply an edit only once it has stayed the same for a period. */
    private Look lastLook;

    /** What one look saw: the file's text ({@code null} when it could not be read) and the other files'. */
    private record Look(String text, Map<Path, String> otherFiles) {
    }

    /** What a reload did. */
    public enum Reload { UNCHANGED, APPLIED, REFUSED }

    private LiveConfig(Path file, ServerMetrics metrics) {
        this.file = file;
        this.name = file == null ? null : file.toString();
        this.metrics = metrics;
        metrics.watch(connections);
    }

    /** Loads {@code file}; a bad file or an unreachable store is refused with a {@link ConfigException}. */
    public static LiveConfig load(Path file, ServerMetrics metrics) throws ConfigException {
        LiveConfig live = new LiveConfig(file, metrics);
        String text = live.read();
        ServerConfig config = ConfigLoader.parse(file.toString(), text);
        Map<Path, String> others = otherFiles(config);
        live.apply(config);
        live.text = text;
        live.applied = text;
        live.otherFiles = others;
        return live;
    }

    /** A configuration that does not come from a file, and so is never reloaded. */
    public static LiveConfig of(ServerConfig config, ServerMetrics metrics) throws ConfigException {
        return of(null, config, metrics);
    }

    /**
     * A configuration read once from where {@code name} says ({@code classpath:sluice.yaml}), never reloaded; a store
     * that cannot be reached is told with that name and the line of {@code store:}, as a file's ({@code null}: "the
     * configuration", with no line).
     */
    public static LiveConfig of(String name, ServerConfig config, ServerMetrics metrics) throws ConfigException {
        LiveConfig live = new LiveConfig(null, metrics);
        live.name = name;
        live.apply(config);
        return live;
    }

    /**
     * A configuration that does not come from a file, decided on {@code store} whatever its {@code store} setting
     * says: a store the caller made (a {@code RedisStore} built with settings of its own, a store shared with
     * limiters of the application), which the caller keeps and closes.
     *
     * @throws IllegalArgumentException if a policy has a {@code max_keys} of its own and {@code store} is not an
     *                                  in-memory store
     */
    public static LiveConfig of(ServerConfig config, Store store, ServerMetrics metrics) {
        for (dev.sluice.server.config.PolicyConfig policy : config.policies()) {
            // its own store is in this process's memory: on a store shared by servers, its limit would be each
            // server's alone, and so as many times higher as there are servers (a review found it silent)
            if (policy.maxKeys() > 0 && !(store instanceof InMemoryStore)) {
                throw new IllegalArgumentException("policy " + policy.name() + ": max_keys " + policy.maxKeys()
                        + " gives it an in-memory store of its own, and the store given is a "
                        + store.getClass().getSimpleName() + ", which its limit would not be shared on");
            }
        }
        LiveConfig live = new LiveConfig(null, metrics);
        live.store = store;
        live.storeGiven = true;
        metrics.watch(store, store instanceof InMemoryStore ? ServerConfig.MEMORY : store instanceof RedisStore ? "redis" : "other");
        live.policies = new Policies(config, store, live.ownStores(config), metrics, Map.of(), live.storeDeciding);
        return live;
    }

    public Policies policies() {
        return policies;
    }

    /** The store the policies in force decide on. */
    public Store store() {
        return policies.store();
    }

    public ServerMetrics metrics() {
        return metrics;
    }

    /** The client connections open over the gateway, API and gRPC ports this configuration serves, and their bound. */
    public ClientConnections connections() {
        return connections;
    }

    /** Reloads the file every {@code period}, on a thread of its own (reading and connecting may block). */
    public synchronized void watch(Duration period) {
        if (file == null || watcher != null) {
            return;
        }
        watcher = Executors.newSingleThreadScheduledExecutor(task -> {
            Thread thread = new Thread(task, "sluice-config-watch");
            thread.setDaemon(true);
            return thread;
        });
        watcher.scheduleWithFixedDelay(() -> reloadWatched(period), period.toMillis(), period.toMillis(), TimeUnit.MILLISECONDS);
    }

    /**
     * {@link #reload}, for the watcher: a failure it did not foresee is logged, and the watcher looks again at its
     * next turn. An exception out of a scheduled task cancels its every later run without a word: a past bug, where
     * one unreadable directory under {@code envoy_configs} ended a running server's reloads for good.
     */
    private void reloadWatched(Duration period) {
        try {
            look();
        } catch (RuntimeException e) {
            metrics.reloaded(false); // counted as any refused reload, so that the alert on reloads sees it
            LOG.log(System.Logger.Level.ERROR, file + ": could not be read again (the last good configuration stays in"
                    + " force, and it is looked at again in " + period.toMillis() + " ms)", e);
        }
    }

    /**
     * One look of the watcher's: the files are read, and {@link #reload()}ed if they hold what they held at the last
     * look, so that an edit is applied once it has stayed the same for a period.
     */
    Reload look() {
        Look look;
        synchronized (this) {
            look = new Look(readOrNull(), ConfigLoader.snapshot(otherFiles.keySet()));
        }
        // compared field by field: a record's own equals is made at its first call by the JDK's ObjectMethods, whose
        // cache then held the record's class, and with it a web application's class loader after undeploy (JDK 17;
        // found by trying the servlet filter in Tomcat)
        boolean settled = lastLook != null && java.util.Objects.equals(look.text(), lastLook.text())
                && look.otherFiles().equals(lastLook.otherFiles());
        lastLook = look;
        return settled ? reload(look) : Reload.UNCHANGED;
    }

    /** Reads the file again and applies it if it changed and checks out. */
    public Reload reload() {
        return reload(null);
    }

    /** {@link #reload()}; given a look, only if the file still holds what it saw (else it is looked at again). */
    private synchronized Reload reload(Look settled) {
        if (file == null || closed) { // closed: a watcher that waited for the lock opens no store nobody would close
            return Reload.UNCHANGED;
        }
        String now;
        try {
            now = read();
        } catch (ConfigException e) {
            if (settled != null && settled.text() != null) {
                return Reload.UNCHANGED; // gone since the look: it must stay so for a period first
            }
            if (e.getMessage().equals(unreadable)) {
                return Reload.UNCHANGED;
            }
            unreadable = e.getMessage();
            return refused(e.getMessage(), null);
        }
        if (settled != null && !now.equals(settled.text())) {
            return Reload.UNCHANGED; // written to again since the look: it must stay so for a period first
        }
        unreadable = null;
        boolean again = now.equals(unreached);
        if (!again) {
            unreached = null; // another edit since: that one is tried, and reported, on its own
        }
        if (!again && now.equals(text) && !ConfigLoader.changed(otherFiles)) {
            if (now.equals(applied)) { // the file in force is on disk again (it was gone, or unreadable): in force
                metrics.inForce();
            }
            return Reload.UNCHANGED;
        }
        ServerConfig config;
        try {
            config = ConfigLoader.parse(file.toString(), now);
        } catch (ConfigException e) {
            // the files read before the refusal, and those watched before it: a store_trust file refused at its
            // line is among the latter only, and its fix must be seen (a review found it watched no more)
            Map<Path, String> watched = new java.util.HashMap<>(ConfigLoader.snapshot(otherFiles.keySet()));
            watched.putAll(e.read());
            otherFiles = watched;
            return refused(e.getMessage(), now);
        }
        Map<Path, String> others = otherFiles(config); // before the store reads its trust: a later change is seen
        ServerConfig before = policies.config();
        Store storeBefore = store;
        try {
            apply(config);
        } catch (ConfigException e) { // the store could not be reached
            otherFiles = others;
            if (again) {
                return Reload.UNCHANGED; // still not: reported at the first try
            }
            unreached = now;
            return refused(e.getMessage(), now);
        }
        unreached = null;
        text = now;
        applied = now;
        otherFiles = others;
        metrics.reloaded(true);
        int count = policies.config().policies().size();
        LOG.log(System.Logger.Level.INFO, "{0}: reloaded, {1} polic{2} in force{3}", file, count,
                count == 1 ? "y" : "ies", changes(before, config, storeBefore != store));
        return Reload.APPLIED;
    }

    /**
     * What a reload changed, as its line says it: the policies added, removed and changed (those whose counts start
     * afresh said so), a store opened anew (in memory, the shared store's counts start afresh) and the failure
     * policy. A review found one line for every reload, the same for a typo fixed and for every in-memory count wiped.
     */
    static String changes(ServerConfig before, ServerConfig after, boolean storeOpened) {
        // by name, once: an Envoy configuration's tree is thousands of policies, and a search of the list for each
        // made a reload's line quadratic
        Map<String, dev.sluice.server.config.PolicyConfig> left = new java.util.LinkedHashMap<>();
        before.policies().forEach(policy -> left.put(policy.name(), policy));
        List<String> added = new ArrayList<>();
        List<String> changed = new ArrayList<>();
        for (dev.sluice.server.config.PolicyConfig policy : after.policies()) {
            dev.sluice.server.config.PolicyConfig was = left.remove(policy.name());
            if (was == null) {
                added.add(policy.name());
            } else if (!policy.equals(was)) {
                // a change of what its counters mean, or of its own store, starts its counts afresh: said, as a new
                // store is (a review found "changed: login" alike for a typo fixed and for its counts wiped)
                changed.add(Policies.keepsCounts(was, policy) ? policy.name() : policy.name() + " (counts afresh)");
            }
        }
        StringBuilder said = new StringBuilder();
        for (var part : List.of(Map.entry("added", added), Map.entry("removed", List.copyOf(left.keySet())),
                Map.entry("changed", changed))) {
            if (!part.getValue().isEmpty()) {
                said.append("; ").append(part.getKey()).append(": ").append(String.join(", ", part.getValue()));
            }
        }
        if (storeOpened) {
            said.append("; store opened anew: ").append(after.inMemory() ? "memory, max_keys " + after.maxKeys()
                    + " (every count of the shared store starts afresh)" : after.storeShown());
        }
        if (!after.inMemory() && before.onStoreFailure() != after.onStoreFailure()) {
            said.append("; on_store_failure: ").append(after.onStoreFailure().name().toLowerCase(java.util.Locale.ROOT));
        }
        return said.toString();
    }

    private Reload refused(String message, String seen) {
        if (seen != null) {
            text = seen; // logged and counted once per bad edit, not once per look
        }
        metrics.reloaded(false);
        LOG.log(System.Logger.Level.ERROR, "{0} (the last good configuration stays in force)", message);
        return Reload.REFUSED;
    }

    private String read() throws ConfigException {
        return TextFile.read(file);
    }

    private String readOrNull() {
        try {
            return read();
        } catch (ConfigException unreadable) {
            return null;
        }
    }

    private void apply(ServerConfig config) throws ConfigException {
        // the in-memory store has no timeout and never fails: changing those settings must not lose its counters
        // (a change of max_keys opens a new one, as a change of store does)
        // nor does the failure policy need a new store: it is changed on the one in use, Redis down or not
        String settings = config.store() + " " + (config.inMemory() ? config.maxKeys()
                : config.storeTimeoutNanos() + " " + trustSeen(config.storeTrust()) + " "
                + (config.storeInBackground() ? "background" : "now") + " "
                + (config.storePassword() == null ? "" : config.storePassword().fingerprint()));
        Store old = store;
        LongAdder oldDeciding = storeDeciding;
        long oldTimeout = store instanceof RedisStore ? storeTimeoutNanos : 0; // memory's decisions never wait
        if (settings.equals(storeSettings) && store instanceof RedisStore redis) {
            redis.onFailure(config.onStoreFailure());
        }
        if (!settings.equals(storeSettings)) {
            Store opened = open(config);
            metrics.watch(opened, config.inMemory() ? ServerConfig.MEMORY : "redis");
            store = opened;
            if (opened instanceof InMemoryStore) {
                sweep();
            }
            storeSettings = settings;
            storeTimeoutNanos = config.storeTimeoutNanos();
            storeDeciding = new LongAdder();
        }
        policies = new Policies(config, store, ownStores(config), metrics, policies == null ? Map.of()
                : policies.inFlight(), storeDeciding);
        if (old != null && old != store) {
            // the decisions it was making have had their store_timeout, however long it was (a review found a store
            // of a 10 s timeout closed at 5 s, its waiting decisions failed), and the grace beyond it
            retire(old, oldDeciding, oldStoreGrace.toNanos() + oldTimeout);
        }
    }

    /**
     * Closes {@code old} once {@code deciding} counts no decision under way on it, looked at after {@code graceNanos},
     * then every second, for {@link #OLD_STORE_LONGEST} at most. Why not at once: a request or call that took the
     * policies before the reload decides on the old store to its end, each of its charges. Why not after a fixed
     * time only: a call of many descriptors on a slow Redis outlasted it, and its charges after the close failed
     * (a review found it). The grace covers a caller that took the policies and has not counted itself yet.
     */
    private void retire(Store old, LongAdder deciding, long graceNanos) {
        ScheduledExecutorService looks;
        synchronized (retiring) {
            retiring.put(old, deciding);
            if (retirer == null) {
                ScheduledThreadPoolExecutor threads = new ScheduledThreadPoolExecutor(1, task -> {
                    Thread thread = new Thread(task, "sluice-store-retire");
                    thread.setDaemon(true);
                    return thread;
                });
                // close() shuts it down and waits for a look closing a store, not for the looks still to come
                threads.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
                retirer = threads;
            }
            looks = retirer;
        }
        long last = System.nanoTime() + graceNanos + OLD_STORE_LONGEST.toNanos();
        looks.schedule(() -> lookAt(old, last), graceNanos, TimeUnit.NANOSECONDS);
    }

    /** A look of {@link #retire} at {@code old}: closed if no decision is under way or {@code last} is past, else again. */
    private void lookAt(Store old, long last) {
        // closed outside the lock, which a reload takes to retire a store: closing a Cluster's connections and
        // threads takes seconds, and a reload waited for them (a review found it); close() waits for this thread
        synchronized (retiring) {
            LongAdder deciding = retiring.get(old);
            if (deciding == null) {
                return; // closed by close()
            }
            long left = deciding.sum();
            if (left > 0 && System.nanoTime() - last < 0) {
                retirer.schedule(() -> lookAt(old, last), 1, TimeUnit.SECONDS);
                return;
            }
            if (left > 0) {
                LOG.log(System.Logger.Level.WARNING, "closing the replaced store with " + left
                        + " decisions still under way on it, after " + OLD_STORE_LONGEST.toMinutes() + " minutes");
            }
            retiring.remove(old);
        }
        closing.accept(old);
        metrics.retired(old);
    }

    private Store open(ServerConfig config) throws ConfigException {
        if (config.inMemory()) {
            return InMemoryStore.builder().maxKeys(config.maxKeys()).build();
        }
        LettuceLog.sayOnce();
        // at the line of store:, as every other error of the file (a review found the file named alone)
        String where = (name == null ? "the configuration" : name + (config.storeLine() > 0 ? ":" + config.storeLine()
                : "")) + ": store " + config.storeShown();
        RedisStore store;
        try {
            // a store that cannot be opened is told in the server's one line, which Lettuce's own would only repeat
            store = LettuceLog.silentWhile(() -> {
                RedisStore.Builder builder = RedisStore.builder(config.store())
                        .timeout(Duration.ofNanos(config.storeTimeoutNanos())).onFailure(config.onStoreFailure())
                        .connectInBackground(config.storeInBackground());
                if (config.storePassword() != null) {
                    builder.password(config.storePassword().value());
                }
                return (config.storeTrust() == null ? builder : builder.trust(config.storeTrust())).build();
            });
        } catch (RuntimeException e) {
            throw new ConfigException(where + ": cannot connect: " + rootMessage(e).replace(config.store(), config.storeShown()));
        }
        try {
            // one real decision: a Redis that answers PING may still decide nothing (a user without EVALSHA or
            // without sluice:* keys, a replica), and the failure policy would then admit every request uncounted
            LettuceLog.silentWhile(() -> {
                store.probe();
                return null;
            });
        } catch (RuntimeException e) {
            if (config.storeInBackground() && !refusedByRedis(e)) {
                // not reached yet: in force all the same, as asked (store_connect: background). A Redis that turns
                // out to refuse the decisions once reached (a user without EVALSHA, a replica) is not probed then:
                // they fail by on_store_failure, and the store logs why, once for each kind of failure
                LOG.log(System.Logger.Level.WARNING, where + ": not reachable now (" + rootMessage(e).replace(
                        config.store(), config.storeShown()) + "); connecting in the background, each decision"
                        + " meanwhile on_store_failure's (" + config.onStoreFailure().name().toLowerCase(
                        java.util.Locale.ROOT) + ")");
                return store;
            }
            close(store);
            throw new ConfigException(where + ": cannot decide: " + rootMessage(e).replace(config.store(), config.storeShown()));
        }
        return store;
    }

    /** Whether {@code e} is Redis's own refusal (an error reply), not a Redis that could not be reached. */
    private static boolean refusedByRedis(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause instanceof io.lettuce.core.RedisCommandExecutionException) {
                return true;
            }
        }
        return false;
    }

    /**
     * The message of {@code e}'s first cause, on one line: Lettuce's for a Cluster it cannot read spans several, with
     * tabs ("Cannot retrieve cluster partitions from [...]\n\nDetails:\n\t[...]: ..."), which the error line showed
     * as {@code \x0a} and {@code \x09} (a review found it).
     */
    private static String rootMessage(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        String message = String.valueOf(root.getMessage()).strip();
        return message.replaceAll("\\s*\\n\\s*Details:\\s*", ": ").replaceAll("\\s*\\n\\s*", "; ");
    }

    private static void close(Store store) {
        if (store instanceof AutoCloseable closeable) {
            try {
                closeable.close();
            } catch (Exception e) {
                LOG.log(System.Logger.Level.WARNING, "closing the old store: " + e);
            }
        }
    }

    /**
     * What the files {@code config} reads besides itself hold now: those of {@code envoy_configs}, the certificates
     * of {@code store_trust} and the password of {@code store_password_file}, watched as the file is, so that a CA or
     * a password rotated in place opens a new store without an edit of the configuration (a review found a CA taken
     * only at the next edit).
     */
    private static Map<Path, String> otherFiles(ServerConfig config) {
        java.util.Set<Path> store = new java.util.HashSet<>();
        if (config.storeTrust() != null) {
            store.add(config.storeTrust());
        }
        if (config.storePassword() != null && config.storePassword().file() != null) {
            store.add(config.storePassword().file());
        }
        if (store.isEmpty()) {
            return config.envoy().files();
        }
        Map<Path, String> files = new java.util.HashMap<>(config.envoy().files());
        files.putAll(ConfigLoader.snapshot(store));
        return files;
    }

    /**
     * The certificates a TLS store trusts, as the file holds them now: a CA rotated in the same file opens a new store
     * (a review found only a new path did).
     */
    private static String trustSeen(Path trust) {
        if (trust == null) {
            return "the JVM's trust";
        }
        try {
            return trust + " " + Sha256.hex(java.nio.file.Files.readAllBytes(trust));
        } catch (java.io.IOException e) {
            return trust + " unreadable"; // the store's own opening says why
        }
    }

    /** The stores of {@code config}'s policies that have one of their own: counted, and swept of expired keys. */
    private Map<String, InMemoryStore> ownStores(ServerConfig config) {
        Map<String, InMemoryStore> own = ownStores.update(config);
        metrics.watchOwn(own);
        if (!own.isEmpty()) {
            sweep();
        }
        return own;
    }

    /**
     * Starts dropping the expired keys of the store in use, while it is an in-memory store of the server's own, and
     * of the policies' own stores.
     */
    private synchronized void sweep() {
        if (sweeper != null) {
            return;
        }
        sweeper = Executors.newSingleThreadScheduledExecutor(task -> {
            Thread thread = new Thread(task, "sluice-sweeper");
            thread.setDaemon(true);
            return thread;
        });
        long period = sweepPeriod.toMillis();
        sweeper.scheduleWithFixedDelay(() -> {
            try {
                if (store instanceof InMemoryStore memory && !storeGiven) {
                    memory.cleanUp();
                }
                ownStores.cleanUp();
            } catch (RuntimeException e) { // an exception would end every later sweep without a word
                LOG.log(System.Logger.Level.WARNING, "dropping expired keys failed (tried again in " + period + " ms)", e);
            }
        }, period, period, TimeUnit.MILLISECONDS);
    }

    @Override
    public synchronized void close() {
        closed = true;
        for (ScheduledExecutorService threads : new ScheduledExecutorService[] {watcher, sweeper}) {
            if (threads != null) {
                threads.shutdownNow();
                try {
                    // ended before the application that made them is gone: Tomcat warns of a thread left running
                    threads.awaitTermination(1, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        if (!storeGiven) {
            close(store);
        }
        // and the stores replaced not long ago, whose decisions end with this configuration's (their threads
        // outlived a servlet filter's destroy() by seconds: a review found it)
        ScheduledExecutorService looks;
        List<Store> replaced;
        synchronized (retiring) {
            replaced = new ArrayList<>(retiring.keySet());
            retiring.clear();
            looks = retirer;
        }
        replaced.forEach(closing);
        if (looks != null) { // and a store a look took away before, closed on its thread
            looks.shutdown();
            try {
                looks.awaitTermination(RETIRED_CLOSE_LONGEST.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
