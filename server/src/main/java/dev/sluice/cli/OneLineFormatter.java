package dev.sluice.cli;

import dev.sluice.server.config.TerminalText;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.logging.Formatter;
import java.util.logging.LogRecord;

/**
 * Each event of the log on one line, as log shippers (Fluent Bit, Loki, a container's log) take a line for a record:
 * {@code 2026-11-29T13:04:56.123+0000 SEVERE sluice: message | java.io.IOException: ...\n\tat ...}. The JDK's own
 * format wrote two lines, the level apart from its message, its time without its zone, and a stack trace over many
 * (a review from Kubernetes' side). Line breaks in a message or a stack trace are written {@code \n}; the level is
 * its name, never translated ({@code SCHWERWIEGEND} under a German locale would defeat every parser).
 */
final class OneLineFormatter extends Formatter {
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSxx");

    @Override
    public String format(LogRecord record) {
        StringBuilder line = new StringBuilder(128)
                .append(TIME.format(record.getInstant().atZone(ZoneId.systemDefault()))).append(' ')
                .append(record.getLevel().getName()).append(' ').append(record.getLoggerName()).append(": ")
                .append(oneLine(formatMessage(record)));
        if (record.getThrown() != null) {
            StringWriter trace = new StringWriter();
            record.getThrown().printStackTrace(new PrintWriter(trace));
            line.append(" | ").append(oneLine(trace.toString().strip()));
        }
        return line.append(System.lineSeparator()).toString();
    }

    /**
     * {@code text} with its line breaks written {@code \n}, and its other control characters but tabs escaped as
     * {@link TerminalText} escapes them: a message may hold what a client sent (a path, an Envoy domain), and an escape sequence written
     * as it is would rewrite what a terminal shows (a review found only line breaks taken care of).
     */
    static String oneLine(String text) {
        return TerminalText.of(
                text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n"), true);
    }
}
