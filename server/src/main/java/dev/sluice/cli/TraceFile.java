package dev.sluice.cli;

import dev.sluice.algorithm.Rule;

import java.io.BufferedReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a whole trace (spec/simulate.md) before anything is decided, so that bad input stops the run before
 * any output line is written. Every error names the file, the line and the value.
 */
final class TraceFile {
    /** The last {@code t_ms} whose time in nanoseconds a decision accepts. */
    static final long MAX_MILLIS = Rule.MAX_TIME_NANOS / 1_000_000;

    private final String name;
    private int columnTime = -1;
    private int columnKey = -1;
    private int columnCost = -1;
    private int columns;

    private TraceFile(String name) {
        this.name = name;
    }

    /**
     * @param name   the file as the user named it, for messages ({@code <stdin>} for standard input)
     * @param reader the trace
     */
    static List<TraceRequest> read(String name, BufferedReader reader) throws BadInput {
        return new TraceFile(name).parse(reader);
    }

    private List<TraceRequest> parse(BufferedReader reader) throws BadInput {
        List<TraceRequest> trace = new ArrayList<>();
        try {
            String header = reader.readLine();
            if (header == null) {
                throw new BadInput(name + ":1: the trace is empty; expected the header line t_ms,key,cost");
            }
            header(stripCarriageReturn(header));
            long previous = 0;
            int number = 1;
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                number++;
                line = stripCarriageReturn(line);
                if (line.isBlank()) {
                    continue;
                }
                TraceRequest request = request(line, number);
                if (request.millis() < previous) {
                    throw new BadInput(at(number) + "time goes backwards: t_ms " + request.millis()
                            + " comes after t_ms " + previous);
                }
                previous = request.millis();
                trace.add(request);
            }
        } catch (IOException e) {
            throw new BadInput(name + ": cannot read: " + e.getMessage());
        }
        return trace;
    }

    private static String stripCarriageReturn(String line) {
        return line.endsWith("\r") ? line.substring(0, line.length() - 1) : line;
    }

    private String at(int line) {
        return name + ":" + line + ": ";
    }

    private void header(String line) throws BadInput {
        List<String> names = Csv.split(line);
        if (names == null) {
            throw new BadInput(at(1) + "unclosed quote in the header line");
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
        List<String> fields = Csv.split(line);
        if (fields == null) {
            throw new BadInput(at(number) + "unclosed quote");
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
