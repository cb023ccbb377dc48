package dev.sluice.cli;

import dev.sluice.DurationFormat;
import dev.sluice.Limit;
import dev.sluice.server.config.ConfigException;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.config.PolicyConfig;
import dev.sluice.server.config.ServerConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

/**
 * {@code sluice check [--config FILE]}: reads and checks a configuration without starting anything, as
 * {@code nginx -t} does, so that a deployment can refuse a bad file before a server reloads it. A good file is
 * listed policy by policy (exit 0); a bad one gives the message {@code serve} would refuse it with (exit 2). The
 * store is not contacted.
 */
@Command(name = "check", mixinStandardHelpOptions = true, version = Sluice.VERSION,
        description = "Check a configuration file without starting anything: its policies, or what is wrong with it.")
final class CheckCommand implements Callable<Integer> {
    @Option(names = "--config", paramLabel = "FILE", description = "sluice.yaml (default: examples/sluice.yaml)")
    Path config;

    private final PrintWriter out;

    CheckCommand(PrintWriter out) {
        this.out = out;
    }

    @Override
    public Integer call() throws BadInput {
        Path file = ServiceOptions.configFile(config);
        ServerConfig checked;
        try {
            checked = ConfigLoader.load(file);
        } catch (ConfigException e) {
            throw new BadInput(e.getMessage());
        }
        int count = checked.policies().size();
        out.printf("%s: ok, %d %s, store %s%n", file, count, count == 1 ? "policy" : "policies", checked.storeShown());
        for (PolicyConfig policy : checked.policies()) {
            out.printf("  %s: %s %s, %s, key %s%s%s%n", policy.name(), policy.algorithm(),
                    policy.limits().stream().map(Limit::toString).collect(Collectors.joining(", ", "[", "]")),
                    mode(policy), policy.key(), cost(policy), match(policy.match()));
        }
        out.flush();
        return 0;
    }

    /**
     * The mode, and how long a delay may be: every field that changes a decision is shown, as {@code /v1/policies}
     * shows it (a review found max_delay, cost and skip_if_missing left out).
     */
    private static String mode(PolicyConfig policy) {
        return policy.rule() != null && policy.rule().hasMaxDelay()
                ? policy.mode() + " up to " + DurationFormat.format(policy.rule().maxDelayNanos()) : policy.mode();
    }

    /**
     * A cost other than 1 a request, how a rejection is answered, the policies replaced, a store of the policy's own, and
     * a policy that passes over a request missing a key part.
     */
    private static String cost(PolicyConfig policy) {
        String cost = policy.costHeader() != null ? ", cost header:" + policy.costHeader()
                : policy.cost() != 1 ? ", cost " + policy.cost() : "";
        String rejecting = policy.rejectStatus() != PolicyConfig.DEFAULT_REJECT_STATUS
                ? cost + ", rejects with " + policy.rejectStatus() : cost;
        rejecting = policy.rejection().body() == null ? rejecting : rejecting + ", reject body " + policy.rejection().body();
        rejecting = policy.replaces().isEmpty() ? rejecting : rejecting + ", replaces " + policy.replaces();
        rejecting = policy.maxKeys() == 0 ? rejecting : rejecting + ", own store of " + policy.maxKeys() + " keys";
        return policy.skipIfMissing() ? rejecting + ", skip_if_missing" : rejecting;
    }

    /** What a policy matches, as the file says it; nothing for a policy that matches every HTTP request. */
    private static String match(PolicyConfig.Match match) {
        List<String> parts = new ArrayList<>();
        if (match.path() != null) {
            parts.add("path " + match.path());
        }
        if (match.methods() != null) {
            parts.add("methods " + match.methods());
        }
        if (match.host() != null) {
            parts.add("host " + match.host());
        }
        if (match.headers() != null) {
            match.headers().forEach((name, value) -> parts.add("header " + name + ": " + value));
        }
        if (match.domain() != null) {
            parts.add("Envoy domain " + match.domain() + " descriptor " + match.descriptor());
        }
        return parts.isEmpty() ? "" : ", for " + String.join(", ", parts);
    }
}
