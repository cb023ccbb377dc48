package dev.sluice.cli;

import dev.sluice.algorithm.Rule;

import dev.sluice.server.config.TextFile;

import java.io.IOException;
import java.io.InputStream;
import java.util.List;

/**
 * Reads a trace (docs/simulate.md) one request at a time, so that a trace of any length is replayed in the memory
 * its keys take, not its lines (a review found a trace of 55 MB needing 600 MB of heap, when it was held whole). Every
 * error names the file, the line and the value; the command holds back its output until the last line has been read,
 * so bad input still leaves none.
 */
final class TraceFile {
    /** The last {@code t_ms} whose time in nanoseconds a decision accepts. */
    static final long MAX_MILLIS = Rule.MAX_TIME_NANOS / 1_000_000;

    private final String name;
    private final TraceLines lines;
    private int columnTime = -1;
    private int columnKey = -1;
    private int columnCost = -1;
    private int columns;
    /** The {@code t_ms} of the request read last: a trace's time never goes backwards. */
    private long previous;

    private TraceFile(String name, InputStream in) {
        this.name = name;
        this.lines = new TraceLines(name, in);
    }

    /**
     * Reads the trace's header line.
     *
     * @param name the file as the user named it, for messages ({@code <stdin>} for standard input)
     * @param in   the trace, buffered
     */
    static TraceFile open(String name, InputStream in) throws BadInput {
        TraceFile trace = new TraceFile(name, in);
        String header = trace.line();
        if (header == null) {
            throw new BadInput(name + ":1: the trace is empty; expected the header line t_ms,key,cost");
        }
        trace.header(header);
        return trace;
    }

    /** The number of the line read last (1 is the header). */
    int lineNumber() {
        return lines.number();
    }

    /** The next request of the trace, blank lines passed over; null at its end. */
    TraceRequest next() throws BadInput {
        for (String line = line(); line != null; line = line()) {
            if (line.isBlank()) {
                continue;
            }
            int number = lines.number();
            TraceRequest request = request(line, number);
            if (request.millis() < previous) {
                throw new BadInput(at(number) + "time goes backwards: t_ms " + request.millis()
                        + " comes after t_ms " + previous);
            }
            previous = request.millis();
            return request;
        }
        return null;
    }

    private String line() throws BadInput {
        try {
            return lines.next();
        } catch (IOException e) {
            throw new BadInput(name + ": cannot read: " + TextFile.reason(e));
        }
    }

    private String at(int line) {
        return name + ":" + line + ": ";
    }

    private void header(String line) throws BadInput {
        if (line.startsWith("\uFEFF")) { // the byte-order mark a spreadsheet writes: it made "\uFEFFt_ms" unknown
            line = line.substring(1);
        }
        List<String> names;
        try {
            names = Csv.split(line);
        } catch (IllegalArgumentException e) {
            throw new BadInput(at(1) + "the header line: " + e.getMessage());
        }
        columns = names.size();
        for (int i = 0; i < names.size(); i++) {
            String column = names.get(i).trim();
            switch (column) {
                case "t_ms" -> columnTime = once(columnTime, i, column);
                case "key" -> columnKey = once(columnKey, i, column);
                case "cost" -> columnCost = once(columnCost, i, column);
                default -> throw new BadInput(at(1) + "unknown column \"" + column
                        + "\": expected t_ms, key and optionally cost");
            }
        }
        if (columnTime < 0 || columnKey < 0) {
            throw new BadInput(at(1) + "missing column \"" + (columnTime < 0 ? "t_ms" : "key")
                    + "\": the header must name t_ms, key and optionally cost");
        }
    }

    private int once(int seen, int index, String column) throws BadInput {
        if (seen >= 0) {
            throw new BadInput(at(1) + "column \"" + column + "\" appears twice");
        }
        return index;
    }

    private TraceRequest request(String line, int number) throws BadInput {
        List<String> fields;
        try {
            fields = Csv.split(line);
        } catch (IllegalArgumentException e) {
            throw new BadInput(at(number) + e.getMessage());
        }
        if (fields.size() != columns) {
            throw new BadInput(at(number) + "expected " + columns + " fields, got " + fields.size());
        }
        String millis = fields.get(columnTime);
        long t = wholeNumber(millis, number, "t_ms");
        if (t > MAX_MILLIS) {
            throw new BadInput(at(number) + "t_ms must be at most " + MAX_MILLIS + ", got \"" + millis + "\"");
        }
        String key = fields.get(columnKey);
        if (key.isEmpty()) {
            throw new BadInput(at(number) + "key must not be empty");
        }
        long cost = columnCost < 0 ? 1 : wholeNumber(fields.get(columnCost), number, "cost");
        return new TraceRequest(t, key, cost);
    }

    private long wholeNumber(String text, int number, String column) throws BadInput {
        if (text.isEmpty() || !text.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new BadInput(at(number) + column + " must be a whole number >= 0, got \"" + text + "\"");
        }
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException tooLarge) {
            throw new BadInput(at(number) + column + " is too large, got \"" + text + "\"");
        }
    }
}
