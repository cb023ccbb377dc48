package dev.sluice.server.request;

import dev.sluice.Limit;

import java.util.ArrayList;
import java.util.List;

/**
 * One descriptor of a call to Envoy's rate limit service ({@code envoy.service.ratelimit.v3}): its domain, its
 * entries in order, and how many hits it adds. It is decided as a request is: policies whose {@code match} names
 * its domain and the keys of its entries apply, and their {@code descriptor:KEY} key parts read its values. It has
 * none of an HTTP request's parts, so a policy that matches HTTP requests never matches it, and the other way round.
 *
 * @param hits  how many hits it adds: each matching policy is charged its {@code cost} times this (0 only looks)
 * @param limit the limit the call brings for it (Envoy's limit override, {@code descriptors[i].limit}), which then
 *              decides it instead of the policies; null when it brings none
 */
public record Descriptor(String domain, List<Entry> entries, long hits, Limit limit) implements ClientRequest {
    /**
     * One entry: {@code remote_address = 10.0.0.7}. In a policy's pattern, a null value stands for any value, and a
     * value that ends in {@code *} for any value that starts with what comes before it ({@code 10.0.*}), as in
     * Envoy's own service.
     */
    public record Entry(String key, String value) {
        /** Whether this entry of a pattern takes {@code given}'s value: the same key, and the value it names. */
        boolean takes(Entry given) {
            if (!key.equals(given.key())) {
                return false;
            }
            return value == null || (wildcard() ? given.value().startsWith(value.substring(0, value.length() - 1))
                    : value.equals(given.value()));
        }

        /** A pattern's value that stands for every value with its prefix. */
        public boolean wildcard() {
            return value != null && value.endsWith("*");
        }

        @Override
        public String toString() {
            return value == null ? key : key + "=" + value;
        }
    }

    public Descriptor {
        entries = List.copyOf(entries);
    }

    /** A descriptor decided by the policies (no limit override). */
    public Descriptor(String domain, List<Entry> entries, long hits) {
        this(domain, entries, hits, null);
    }

    /**
     * Its domain and entries as one key, {@code domain|key|value|key|value}, each part escaped as a key's parts
     * are, so that two descriptors have the same text only if they have the same domain and entries.
     */
    public String text() {
        StringBuilder text = KeyPart.escaped(new StringBuilder(), domain);
        for (Entry entry : entries) {
            KeyPart.escaped(text.append('|'), entry.key()).append('|');
            KeyPart.escaped(text, entry.value());
        }
        return text.toString();
    }

    /** The value of the first entry with this key, or null. */
    public String value(String key) {
        for (Entry entry : entries) {
            if (entry.key().equals(key)) {
                return entry.value();
            }
        }
        return null;
    }

    /**
     * Whether {@code pattern} fits this descriptor: as many entries, the same keys in the same order, and the value
     * wherever the pattern names one.
     */
    public boolean fits(List<Entry> pattern) {
        if (pattern.size() != entries.size()) {
            return false;
        }
        for (int i = 0; i < pattern.size(); i++) {
            if (!pattern.get(i).takes(entries.get(i))) {
                return false;
            }
        }
        return true;
    }

    /**
     * The pattern, of {@code patterns} (those of this descriptor's domain), that decides this descriptor, or null:
     * the patterns are walked as Envoy's own service walks the tree of its configuration, entry by entry. At each
     * entry, the patterns that name its value are kept if there are any; else those whose wildcard takes it (the
     * first such wildcard, in order); else those that take any value of its key. The walk ends on the patterns
     * as long as the descriptor. Once a value was named, a pattern that took any value at that entry is out of
     * the running even if the named ones lead nowhere: {@code [a=1, b=2]} leaves {@code a=1, b=3} to no
     * pattern, though {@code [a, b]} fits it. That is Envoy's rule, and a configuration written for Envoy's
     * service decides the same here.
     */
    public List<Entry> walk(List<List<Entry>> patterns) {
        List<List<Entry>> running = patterns;
        for (int i = 0; i < entries.size() && !running.isEmpty(); i++) {
            Entry given = entries.get(i);
            List<List<Entry>> named = new ArrayList<>();
            List<List<Entry>> wild = new ArrayList<>();
            List<List<Entry>> any = new ArrayList<>();
            String firstWildcard = null;
            for (List<Entry> pattern : running) {
                Entry entry = i < pattern.size() ? pattern.get(i) : null;
                if (entry == null || !entry.takes(given)) {
                    continue;
                }
                if (entry.value() == null) {
                    any.add(pattern);
                } else if (!entry.wildcard()) {
                    named.add(pattern);
                } else if (firstWildcard == null || firstWildcard.equals(entry.value())) {
                    firstWildcard = entry.value();
                    wild.add(pattern);
                }
            }
            running = !named.isEmpty() ? named : !wild.isEmpty() ? wild : any;
        }
        for (List<Entry> pattern : running) {
            if (pattern.size() == entries.size()) {
                return pattern;
            }
        }
        return null;
    }

    @Override
    public String method() {
        return null;
    }

    @Override
    public String path() {
        return null;
    }

    @Override
    public String host() {
        return null;
    }

    @Override
    public String ip() {
        return null;
    }

    @Override
    public String header(String name) {
        return null;
    }

    @Override
    public String query(String name) {
        return null;
    }
}
