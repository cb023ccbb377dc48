package dev.sluice.cli;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ServerConfig;
import dev.sluice.server.http.ApiServer;
import dev.sluice.server.http.Gateway;
import dev.sluice.server.http.UpstreamAddress;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code sluice gateway --upstream URL}: the limiter as a reverse proxy in front of an API (docs/server.md).
 * With {@code --admin-port} it also serves the HTTP API, {@code /metrics}, {@code /healthz} and the dashboard
 * on that port, on the same policies and counters.
 */
@Command(name = "gateway", mixinStandardHelpOptions = true, version = Sluice.VERSION, sortOptions = false,
        description = "Run a reverse proxy that rate limits every request before it reaches the upstream.")
final class GatewayCommand implements Callable<Integer> {
    @Option(names = "--upstream", required = true, paramLabel = "URL", description = "http://host:port or https://host:port of the API")
    String upstream;

    @Mixin
    ServiceOptions options;

    @Option(names = "--upstream-timeout", paramLabel = "DURATION",
            description = "how long the upstream may stay silent before the answer is a 504 (default 60s)")
    String upstreamTimeout = "60s";

    @Option(names = "--admin-port", paramLabel = "N",
            description = "also serve the HTTP API, /metrics, /healthz and the dashboard on this port")
    Integer adminPort;

    private final PrintWriter out;

    GatewayCommand(PrintWriter out) {
        this.out = out;
    }

    @Override
    public Integer call() throws Exception {
        URI target = upstream();
        long timeoutMs = upstreamTimeoutMs();
        long idleMs = options.idleTimeoutMs();
        long drainNanos = options.drainTimeoutNanos();
        long stopDelayNanos = options.stopDelayNanos();
        if (adminPort != null) {
            ServiceOptions.checkPort("--admin-port", adminPort);
        }
        checkNotItself(target);
        LiveConfig live = options.load();
        List<AutoCloseable> running = new ArrayList<>();
        Gateway gateway = options.listen("--port", options.port,
                () -> Gateway.start(live, target, options.host, options.port, timeoutMs, idleMs), live);
        running.add(gateway);
        ApiServer admin = adminPort == null ? null : options.listen("--admin-port", adminPort,
                () -> ApiServer.start(live, options.host, adminPort, idleMs), gateway, live);
        if (admin != null) {
            running.add(admin);
        }
        running.add(live);
        ServerConfig settings = live.policies().config();
        String host = ServiceOptions.reachableAt(options.host);
        out.printf("sluice: gateway on http://%s:%d to %s, %d %s from %s (store: %s)%n", host, gateway.port(), target,
                settings.policies().size(), settings.policies().size() == 1 ? "policy" : "policies", options.file(),
                settings.storeShown());
        if (adminPort != null) {
            out.printf("        API, dashboard and metrics on http://%s:%d/%n", host, admin.port());
        }
        out.flush();
        ServiceOptions.runUntilStopped(running, stopDelayNanos, drainNanos, out);
        return 0;
    }

    /**
     * Refuses an upstream that is the gateway itself: its port, on an address the gateway listens on. A review
     * pointed a gateway at its own port, and one request went round 739 times, holding 736 connections open, before
     * a 502. A loop through another proxy is not seen here.
     */
    private void checkNotItself(URI target) throws BadInput {
        int upstreamPort = target.getPort() >= 0 ? target.getPort() : target.getScheme().equals("https") ? 443 : 80;
        if (options.port == 0 || upstreamPort != options.port) {
            return;
        }
        try {
            java.net.InetAddress[] listening = java.net.InetAddress.getAllByName(options.host);
            for (java.net.InetAddress address : java.net.InetAddress.getAllByName(target.getHost())) {
                boolean local = address.isLoopbackAddress() || address.isAnyLocalAddress()
                        || java.net.NetworkInterface.getByInetAddress(address) != null;
                for (java.net.InetAddress bound : listening) {
                    if (bound.isAnyLocalAddress() ? local : bound.equals(address)) {
                        throw new BadInput("--upstream " + upstream + ": the gateway itself (--port " + options.port
                                + " on " + options.host + "): each request would be forwarded back to it, round and round");
                    }
                }
            }
        } catch (java.io.IOException unresolved) {
            // a name not known here: not this machine, or one the upstream's connections will report
        }
    }

    private long upstreamTimeoutMs() throws BadInput {
        return ServiceOptions.durationMs("--upstream-timeout", upstreamTimeout, 1);
    }

    private URI upstream() throws BadInput {
        try {
            UpstreamAddress.parse(upstream); // refuses what the gateway cannot forward to, naming it
            return new URI(upstream);
        } catch (IllegalArgumentException | URISyntaxException e) {
            throw new BadInput("--upstream: " + e.getMessage());
        }
    }
}
