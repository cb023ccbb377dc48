package dev.sluice.cli;

import dev.sluice.server.config.TerminalText;

import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.InputStream;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/**
 * The {@code sluice} command. Bad input of any kind ends in one {@code error:} line on standard error and
 * exit status 2; nothing the user typed ever becomes a stack trace.
 */
@Command(name = "sluice", mixinStandardHelpOptions = true, version = Sluice.VERSION,
        description = "An exact rate limiter: in memory, on Redis, as a service and as a gateway.",
        subcommands = {CommandLine.HelpCommand.class})
public final class Sluice {
    /** What {@code --version} prints, on every command. */
    static final String VERSION = "sluice 0.1.0";
    /** Exit status for input the command refuses. */
    static final int BAD_INPUT = 2;

    private Sluice() {
    }

    public static void main(String[] args) {
        if (System.getProperty("java.util.logging.manager") == null) { // before anything logs: see LastingLogManager
            System.setProperty("java.util.logging.manager", LastingLogManager.class.getName());
        }
        // the time zone's rules, loaded now: java.util.logging loads them at its first line, and a server out of file
        // descriptors (a flood of connections) failed to load them there; the error killed the thread that accepts
        // gRPC connections, which never accepted one again (found by attacking the port)
        java.time.ZoneId.systemDefault().getRules();
        oneLineLogs();
        System.exit(run(args, System.in, System.out, new PrintWriter(System.err, true, StandardCharsets.UTF_8)));
    }

    /**
     * Each event of the log on one line ({@link OneLineFormatter}), unless the user configured the log: a
     * configuration file or class of their own, or a format or formatter in the JDK's {@code logging.properties}.
     */
    private static void oneLineLogs() {
        java.util.logging.LogManager logs = java.util.logging.LogManager.getLogManager();
        String formatter = logs.getProperty("java.util.logging.ConsoleHandler.formatter");
        if (System.getProperty("java.util.logging.config.file") != null
                || System.getProperty("java.util.logging.config.class") != null
                || System.getProperty("java.util.logging.SimpleFormatter.format") != null
                || logs.getProperty("java.util.logging.SimpleFormatter.format") != null
                || formatter != null && !formatter.equals(java.util.logging.SimpleFormatter.class.getName())) {
            return;
        }
        for (java.util.logging.Handler handler : java.util.logging.Logger.getLogger("").getHandlers()) {
            if (handler instanceof java.util.logging.ConsoleHandler) {
                handler.setFormatter(new OneLineFormatter());
            }
        }
    }

    /** Runs the command line and returns its exit status. */
    static int run(String[] args, InputStream stdin, OutputStream stdout, PrintWriter err) {
        PrintWriter out = new PrintWriter(new OutputStreamWriter(stdout, StandardCharsets.UTF_8), true);
        CommandLine command = new CommandLine(new Sluice());
        command.addSubcommand(new CommandLine(new ServeCommand(out)));
        command.addSubcommand(new CommandLine(new GatewayCommand(out)));
        command.addSubcommand(new CommandLine(new SimulateCommand(stdin, stdout, err)));
        command.addSubcommand(new CommandLine(new CheckCommand(out)));
        command.setOut(out);
        command.setErr(err);
        command.setParameterExceptionHandler((e, arguments) -> {
            err.println("error: " + TerminalText.of(e.getMessage()));
            if (arguments.length == 0) { // no command at all: which there are (a review found the error alone)
                err.println();
                command.usage(err);
            }
            return BAD_INPUT;
        });
        command.setExecutionExceptionHandler((e, line, parsed) -> {
            if (e instanceof BadInput) {
                err.println("error: " + TerminalText.of(e.getMessage()));
                return BAD_INPUT;
            }
            throw e;
        });
        return command.execute(args);
    }
}
