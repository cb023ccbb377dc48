package dev.sluice.testkit;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;

/**
 * What is logged to one java.util.logging logger (and those below it) while it is open: for tests that assert what
 * Sluice logs, or that it logs nothing. Closing it takes it off the logger.
 */
public final class LogCapture extends Handler implements AutoCloseable {
    private final Logger logger;
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();

    private LogCapture(Logger logger) {
        this.logger = logger;
    }

    /** Captures what is logged to the logger named {@code name}. */
    public static LogCapture of(String name) {
        LogCapture capture = new LogCapture(Logger.getLogger(name));
        capture.logger.addHandler(capture);
        return capture;
    }

    /** The records logged so far. */
    public List<LogRecord> records() {
        return List.copyOf(records);
    }

    /** The messages logged so far, their parameters filled in. */
    public List<String> messages() {
        SimpleFormatter formatter = new SimpleFormatter();
        return records.stream().map(formatter::formatMessage).toList();
    }

    @Override
    public void publish(LogRecord record) {
        records.add(record);
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        logger.removeHandler(this);
    }
}
