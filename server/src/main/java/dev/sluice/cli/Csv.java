package dev.sluice.cli;

import java.util.ArrayList;
import java.util.List;

/**
 * The CSV of traces and decisions (RFC 4180): fields split on commas, a field in double quotes may hold
 * commas and doubled quotes. Keys such as {@code user:42|route:/a,b} survive the round trip.
 */
final class Csv {
    private Csv() {
    }

    /**
     * The fields of one line.
     *
     * @throws IllegalArgumentException saying what is wrong: a quoted field not closed, or text after a quoted
     *                                  field's closing quote ({@code "a"x}, which a lenient reader would take for
     *                                  {@code ax})
     */
    static List<String> split(String line) {
        List<String> fields = new ArrayList<>();
        StringBuilder field = new StringBuilder();
        boolean quoted = false;
        boolean wasQuoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                    field.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                    if (i + 1 < line.length() && line.charAt(i + 1) != ',') {
                        throw new IllegalArgumentException("field " + (fields.size() + 1) + ": text after its closing"
                                + " quote (a quote inside a quoted field is written twice)");
                    }
                } else {
                    field.append(c);
                }
            } else if (c == ',') {
                fields.add(field.toString());
                field.setLength(0);
                wasQuoted = false;
            } else if (c == '"' && field.length() == 0 && !wasQuoted) {
                quoted = true;
                wasQuoted = true;
            } else {
                field.append(c);
            }
        }
        if (quoted) {
            throw new IllegalArgumentException("field " + (fields.size() + 1) + ": unclosed quote");
        }
        fields.add(field.toString());
        return fields;
    }

    /** The field as it must be written: quoted when it holds a comma, a quote or a line break. */
    static String quote(String field) {
        boolean plain = true;
        for (int i = 0; i < field.length() && plain; i++) {
            char c = field.charAt(i);
            plain = c != ',' && c != '"' && c != '\n' && c != '\r';
        }
        return plain ? field : '"' + field.replace("\"", "\"\"") + '"';
    }
}
