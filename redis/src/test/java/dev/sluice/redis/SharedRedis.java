package dev.sluice.redis;

import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;

/**
 * One real redis-server and one store on it for the test classes that need nothing else: started on first
 * use, stopped when the test JVM exits. Tests that kill or pause Redis start their own.
 */
final class SharedRedis {
    private static RedisServer redis;
    private static RedisStore store;

    private SharedRedis() {
    }

    static synchronized RedisServer server() {
        if (redis == null) {
            try {
                redis = RedisServer.start();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            RedisServer started = redis;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    started.kill();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        }
        return redis;
    }

    /** The shared store: see {@link #exacting}. */
    static synchronized RedisStore store() {
        if (store == null) {
            store = exacting(server().uri());
        }
        return store;
    }

    /**
     * A store for tests that compare decisions: a call Redis did not answer throws instead of failing open.
     * A bug pinned: with the default 50 ms timeout a busy CI machine let one call time out, the fail-open
     * answer equalled the expected decision, and the next request of the trace found the key untouched.
     */
    static RedisStore exacting(String uri) {
        return RedisStore.builder(uri).timeout(Duration.ofSeconds(10)).raiseFailures(true).build();
    }

    /** Empties the shared server. */
    static void flush() {
        try (Resp resp = server().connect()) {
            resp.call("FLUSHALL");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
