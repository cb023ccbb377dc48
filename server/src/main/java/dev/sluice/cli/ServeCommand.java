package dev.sluice.cli;

import dev.sluice.server.Policies;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.http.CheckServer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

/**
 * {@code sluice serve}: the rate limit service of spec/server.md over HTTP. With no {@code --config} it serves
 * {@code examples/sluice.yaml} on the in-memory store.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Run the rate limit service: POST /v1/check, GET /v1/policies, GET /healthz.")
final class ServeCommand implements Callable<Integer> {
    @Option(names = "--config", paramLabel = "FILE", description = "sluice.yaml (default: examples/sluice.yaml)")
    Path config;

    @Option(names = "--port", paramLabel = "N", description = "default 8080; 0 picks a free port")
    int port = 8080;

    @Option(names = "--host", paramLabel = "ADDRESS", description = "default 0.0.0.0 (every interface)")
    String host = "0.0.0.0";

    private final PrintWriter out;

    ServeCommand(PrintWriter out) {
        this.out = out;
    }

    @Override
    public Integer call() throws Exception {
        if (port < 0 || port > 65535) {
            throw new BadInput("--port: expected 0 to 65535, got " + port);
        }
        Path file = config != null ? config : defaultConfig();
        ServerConfig settings;
        try {
            settings = ConfigLoader.load(file);
        } catch (ConfigException e) {
            throw new BadInput(e.getMessage());
        }
        Policies policies;
        try {
            policies = new Policies(settings);
        } catch (RuntimeException e) {
            throw new BadInput(file + ": store " + settings.store() + ": cannot connect: " + e.getMessage());
        }
        CheckServer server;
        try {
            server = CheckServer.start(policies, host, port);
        } catch (Exception e) {
            policies.close();
            throw new BadInput("--port " + port + ": cannot listen on " + host + ": " + rootMessage(e));
        }
        String first = settings.policies().get(0).name();
        out.printf("sluice: serving %d %s from %s on http://localhost:%d (store: %s)%n", settings.policies().size(),
                settings.policies().size() == 1 ? "policy" : "policies", file, server.port(), settings.store());
        out.printf("try:    curl -si -X POST localhost:%d/v1/check -d '{\"policy\":\"%s\",\"key\":\"alice\"}'%n",
                server.port(), first);
        out.flush();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.close();
                policies.close();
            } catch (Exception e) {
                // shutting down anyway
            }
            stopped.countDown();
        }));
        stopped.await();
        return 0;
    }

    private static String rootMessage(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        return root.getMessage();
    }

    /** examples/sluice.yaml of the installation ({@code SLUICE_HOME}, set by bin/sluice), else of the current directory. */
    private static Path defaultConfig() {
        String home = System.getenv("SLUICE_HOME");
        if (home != null) {
            Path file = Path.of(home, "examples", "sluice.yaml");
            if (Files.exists(file)) {
                return file;
            }
        }
        return Path.of("examples", "sluice.yaml");
    }
}
