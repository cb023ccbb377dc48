package dev.sluice.server.config;

import dev.sluice.DurationFormat;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.SequenceNode;
import org.yaml.snakeyaml.nodes.Tag;
import org.yaml.snakeyaml.reader.ReaderException;
import org.yaml.snakeyaml.reader.StreamReader;

import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One YAML file read as a tree of nodes that remember where they stood (the YAML engine under Jackson's YAML module),
 * and the checks of a node's shape that every field needs: a mapping of known fields, a list, a single value, a whole
 * number, a duration. Each refusal of a field names the file, the line and the field ({@code sluice.yaml:14:
 * policies[1].limits: expected a list}); one of the YAML itself, the file and the line. {@code sluice.yaml} ({@link ConfigLoader}) and Envoy's configuration files
 * ({@link EnvoyConfigFiles}) are read with it.
 */
final class YamlNodes {
    private final String file;

    YamlNodes(String file) {
        this.file = file;
    }

    /**
     * The longest line read, in chars. SnakeYAML keeps a token it scans (a comment, a scalar) in a window it copies
     * again at every 1,024 chars it reads, so one long line costs the square of its length: 4 MiB took 7 s, 16 MiB
     * (the largest file read) would take minutes. No configuration needs a line of this length; a flow list that
     * long can be written one item a line.
     */
    static final int MAX_LINE = 1 << 20;

    /** The YAML tree of {@code text}, or null for an empty file. */
    Node compose(String text) throws ConfigException {
        checkLines(text);
        try (Reader reader = new StringReader(text)) {
            LoaderOptions options = new LoaderOptions();
            options.setCodePointLimit(TextFile.MAX_BYTES); // as large as a file read may be (3 MiB by default: a review)
            return new Yaml(options).compose(reader);
        } catch (MarkedYAMLException e) {
            int line = e.getProblemMark() == null ? 1 : e.getProblemMark().getLine() + 1;
            throw new ConfigException(file + ":" + line + ": not valid YAML: " + e.getProblem());
        } catch (ReaderException e) {
            // a character YAML does not allow (a control character): SnakeYAML checks the text it has buffered
            // before it marks lines, and its position counts from that buffer's start (1,024 chars), so the
            // character is found again here, and its line counted from the start of the text
            int at = 0;
            while (at < text.length() && StreamReader.isPrintable(text.codePointAt(at))) {
                at += Character.charCount(text.codePointAt(at));
            }
            long line = 1 + text.substring(0, at).chars().filter(c -> c == '\n').count();
            int codePoint = at < text.length() ? text.codePointAt(at) : e.getCodePoint();
            throw new ConfigException(file + ":" + line + ": not valid YAML: " + e.getMessage()
                    + String.format(" (U+%04X)", codePoint));
        } catch (IOException | RuntimeException e) {
            throw new ConfigException(file + ":1: not valid YAML: " + e.getMessage());
        }
    }

    /** Refuses a line longer than {@link #MAX_LINE}, naming it. */
    private void checkLines(String text) throws ConfigException {
        int line = 1;
        int start = 0;
        for (int at = 0; at <= text.length(); at++) {
            if (at == text.length() || text.charAt(at) == '\n') {
                if (at - start > MAX_LINE) {
                    throw new ConfigException(file + ":" + line + ": a line of " + (at - start) + " characters, longer"
                            + " than the " + MAX_LINE + " read: break it up (a list may take one item a line)");
                }
                line++;
                start = at + 1;
            }
        }
    }

    Map<String, Node> fields(Node node, String prefix, Set<String> known) throws ConfigException {
        if (!(node instanceof MappingNode)) {
            throw error(node, prefix.isEmpty() ? "(top)" : prefix.substring(0, prefix.length() - 1), "expected a mapping");
        }
        Map<String, Node> fields = new LinkedHashMap<>();
        for (NodeTuple tuple : ((MappingNode) node).getValue()) {
            String name = tuple.getKeyNode() instanceof ScalarNode scalar ? scalar.getValue() : "?";
            if (!known.contains(name)) {
                throw error(tuple.getKeyNode(), prefix + name, "unknown field \"" + name + "\"; expected one of "
                        + known.stream().sorted().toList());
            }
            if (fields.put(name, tuple.getValueNode()) != null) {
                throw error(tuple.getKeyNode(), prefix + name, "given twice");
            }
        }
        return fields;
    }

    /** The value of the field {@code name} of the mapping {@code node}, or {@code node} itself without one. */
    static Node valueOf(Node node, String name) {
        if (node instanceof MappingNode mapping) {
            for (NodeTuple tuple : mapping.getValue()) {
                if (tuple.getKeyNode() instanceof ScalarNode key && key.getValue().equals(name)) {
                    return tuple.getValueNode();
                }
            }
        }
        return node;
    }

    Node required(Map<String, Node> fields, Node parent, String field, String name) throws ConfigException {
        Node node = fields.get(name);
        if (node == null) {
            throw error(parent, field + "." + name, "missing");
        }
        return node;
    }

    List<Node> list(Node node, String field) throws ConfigException {
        if (!(node instanceof SequenceNode)) {
            throw error(node, field, "expected a list");
        }
        return ((SequenceNode) node).getValue();
    }

    String scalar(Node node, String field) throws ConfigException {
        if (!(node instanceof ScalarNode)) {
            throw error(node, field, "expected a single value");
        }
        String value = ((ScalarNode) node).getValue();
        if (node.getTag().equals(Tag.NULL) && !value.isEmpty()) {
            // ~ and null are YAML's no value, which Sluice took for the text "~" or "null": a host: ~ matched no
            // request, silently (a review found it); an empty value is told at each field as before
            throw error(node, field, "\"" + value + "\" is YAML's null: leave the field out, or give it a value");
        }
        return value;
    }

    /**
     * The value of {@code node}, one of {@code choices}, or a refusal that lists them ({@code expected open or closed,
     * got "opne"}): one check where each field that takes a word from a list wrote its own.
     */
    String choice(Node node, String field, String... choices) throws ConfigException {
        String value = scalar(node, field);
        for (String choice : choices) {
            if (choice.equals(value)) {
                return value;
            }
        }
        String listed = choices.length == 1 ? choices[0] : String.join(", ",
                java.util.Arrays.asList(choices).subList(0, choices.length - 1)) + " or " + choices[choices.length - 1];
        throw error(node, field, "expected " + listed + ", got \"" + value + "\"");
    }

    /** A field of {@code true} or {@code false}. */
    boolean flag(Node node, String field) throws ConfigException {
        return choice(node, field, "true", "false").equals("true");
    }

    long whole(Node node, String field, long least) throws ConfigException {
        String text = scalar(node, field);
        if (text.matches("0[0-9]+")) { // 010: 8 to a YAML 1.1 reader (Envoy's service among them), 10 to others
            throw error(node, field, "\"" + text + "\" starts with a 0, which YAML 1.1 reads as octal: write it"
                    + " without the 0");
        }
        try {
            // ASCII digits: Long.parseLong also reads "٥" (and "+5", which YAML writes as 5 anyway)
            long value = text.matches("-?[0-9]+") ? Long.parseLong(text) : least - 1;
            if (value >= least) {
                return value;
            }
        } catch (NumberFormatException e) {
            // falls through to the message
        }
        throw error(node, field, "expected a whole number >= " + least + ", got \"" + text + "\"");
    }

    long duration(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        return parsed(node, field, () -> DurationFormat.parseNanos(text));
    }

    long positiveDuration(Node node, String field) throws ConfigException {
        String text = scalar(node, field);
        long nanos = parsed(node, field, () -> DurationFormat.parseNanos(text));
        if (nanos <= 0) {
            throw error(node, field, "must be > 0, got \"" + text + "\"");
        }
        return nanos;
    }

    @FunctionalInterface
    interface Parse<T> {
        T get();
    }

    <T> T parsed(Node node, String field, Parse<T> parse) throws ConfigException {
        try {
            return parse.get();
        } catch (IllegalArgumentException e) {
            throw error(node, field, e.getMessage());
        }
    }

    static int line(Node node) {
        return node.getStartMark().getLine() + 1;
    }

    ConfigException error(Node node, String field, String message) {
        return new ConfigException(at(node) + ": " + field + ": " + message);
    }

    /** Where {@code node} stands: {@code file:line}. */
    String at(Node node) {
        return file + ":" + line(node);
    }

    String file() {
        return file;
    }
}
