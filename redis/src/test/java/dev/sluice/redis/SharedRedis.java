package dev.sluice.redis;

import dev.sluice.testkit.redis.RedisServer;
import dev.sluice.testkit.redis.Resp;

import java.io.IOException;
import java.io.UncheckedIOException;

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

    /** The shared store, with the defaults of {@link RedisStore#connect}. */
    static synchronized RedisStore store() {
        if (store == null) {
            store = RedisStore.connect(server().uri());
        }
        return store;
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
