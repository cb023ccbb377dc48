package dev.sluice.cli;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.envoy.EnvoyRateLimitServer;
import dev.sluice.server.http.ApiServer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code sluice serve}: the rate limit service of docs/server.md over HTTP. With no {@code --config} it serves
 * {@code examples/sluice.yaml} on the in-memory store.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, version = Sluice.VERSION, sortOptions = false,
        // the first line whole: sluice --help lists each command by its first line only (a review found it cut)
        description = {"Run the rate limit service: the HTTP API and, with --grpc-port, Envoy's rate limit service.",
                "POST /v1/check, POST /v1/check-request, POST /v1/release, POST /json (Envoy's call over HTTP),",
                "GET /v1/policies, GET /healthz (/healthcheck), GET /metrics, and the dashboard on GET /;",
                "with --grpc-port, envoy.service.ratelimit.v3 too."})
final class ServeCommand implements Callable<Integer> {
    @Mixin
    ServiceOptions options;

    @Option(names = "--grpc-port", paramLabel = "N",
            description = "also answer Envoy's rate limit service (gRPC) on this port; 0 picks a free port (default: off)")
    Integer grpcPort;

    private final PrintWriter out;

    ServeCommand(PrintWriter out) {
        this.out = out;
    }

    @Override
    public Integer call() throws Exception {
        if (grpcPort != null) {
            ServiceOptions.checkPort("--grpc-port", grpcPort);
        }
        long idleMs = options.idleTimeoutMs();
        long drainNanos = options.drainTimeoutNanos();
        long stopDelayNanos = options.stopDelayNanos();
        LiveConfig live = options.load();
        ApiServer server = options.listen("--port", options.port,
                () -> ApiServer.start(live, options.host, options.port, idleMs), live);
        EnvoyRateLimitServer envoy = grpcPort == null ? null : options.listen("--grpc-port", grpcPort,
                () -> EnvoyRateLimitServer.start(live, options.host, grpcPort), server, live);
        ServerConfig settings = live.policies().config();
        String at = ServiceOptions.reachableAt(options.host) + ":" + server.port();
        out.printf("sluice: serving %d %s from %s on http://%s (store: %s)%n", settings.policies().size(),
                settings.policies().size() == 1 ? "policy" : "policies", options.file(), at, settings.storeShown());
        if (!settings.policies().isEmpty()) { // Envoy's files may give none for now (all unlimited), as in Envoy's service
            out.printf("try:    curl -si -X POST %s/v1/check -d '{\"policy\":\"%s\",\"key\":\"alice\"}'%n", at,
                    settings.policies().get(0).name());
        }
        out.printf("        dashboard http://%s/   metrics http://%s/metrics%n", at, at);
        if (envoy != null) {
            out.printf("sluice: Envoy's rate limit service (gRPC) on %s:%d%n", ServiceOptions.reachableAt(options.host),
                    envoy.port());
        }
        out.flush();
        ServiceOptions.runUntilStopped(envoy == null ? List.of(server, live) : List.of(envoy, server, live),
                stopDelayNanos, drainNanos, out);
        return 0;
    }
}
