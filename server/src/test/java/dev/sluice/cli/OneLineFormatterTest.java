package dev.sluice.cli;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.Locale;
import java.util.logging.Level;
import java.util.logging.LogRecord;

import static org.assertj.core.api.Assertions.assertThat;

/** Each event of the log one line, whatever it holds: a message of several lines, a stack trace, a foreign locale. */
class OneLineFormatterTest {
    @Test
    void anEventIsOneLineWithItsTimeZoneLevelAndLogger() {
        LogRecord record = new LogRecord(Level.SEVERE, "first\nsecond\r\nthird");
        record.setLoggerName("sluice");
        record.setThrown(new IOException("refused", new IllegalStateException("deeper")));
        Locale before = Locale.getDefault();
        Locale.setDefault(Locale.GERMANY); // where the JDK's own format writes SCHWERWIEGEND
        String line;
        try {
            line = new OneLineFormatter().format(record);
        } finally {
            Locale.setDefault(before);
        }
        assertThat(line).endsWith(System.lineSeparator());
        String body = line.substring(0, line.length() - System.lineSeparator().length());
        assertThat(body).doesNotContain("\n", "\r")
                .matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}[+-]\\d{4} SEVERE sluice: first\\\\nsecond"
                        + "\\\\nthird \\| java\\.io\\.IOException: refused\\\\n\\tat .*Caused by: java\\.lang\\."
                        + "IllegalStateException: deeper.*");
    }

    /**
     * A message may hold what a client sent (a path, an Envoy domain): its control characters are written escaped, so
     * that a terminal's escape sequence (ESC [2J clears the screen) or a bare CR cannot rewrite what the log shows (a
     * review found only line breaks taken care of).
     */
    @Test
    void controlCharactersAClientSentAreWrittenEscaped() {
        LogRecord record = new LogRecord(Level.WARNING, "domain \u001b[2Jedge\u0007 tab\there \u2028end \u202egnp.exe");
        record.setLoggerName("sluice");
        String line = new OneLineFormatter().format(record);
        assertThat(line).contains("sluice: domain \\x1b[2Jedge\\x07 tab\there \\u2028end \\u202egnp.exe");
        // format characters the log's own list had missed (the structure review): an Arabic letter mark, a tag
        LogRecord format = new LogRecord(Level.WARNING, "a\u061cb\uDB40\uDC41c");
        format.setLoggerName("sluice");
        assertThat(new OneLineFormatter().format(format)).contains("sluice: a\\u061cb\\U000e0041c");
    }
}
