package dev.sluice.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.util.concurrent.Callable;

/** {@code sluice serve}: the HTTP service of spec/server.md, which this build does not have yet. */
@Command(name = "serve", mixinStandardHelpOptions = true, description = "Run the rate limit service (not in this build yet).")
final class ServeCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        spec.commandLine().getErr().println("""
                sluice serve: the HTTP service is not in this build yet.
                Meanwhile, see what a limit does to a stream of requests with sluice simulate:
                  printf 't_ms,key\\n0,alice\\n10000,alice\\n35000,alice\\n45000,alice\\n60000,alice\\n' \\
                    | bin/sluice simulate --algorithm token-bucket --limit 3/1m --refill interval --trace -""");
        return 1;
    }
}
