package dev.sluice.server.request;

import java.util.List;

/**
 * One descriptor of a call to Envoy's rate limit service ({@code envoy.service.ratelimit.v3}): its domain, its
 * entries in order, and how many hits it adds. It is decided as a request is: policies whose {@code match} names
 * its domain and the keys of its entries apply, and their {@code descriptor:KEY} key parts read its values. It has
 * none of an HTTP request's parts, so a policy that matches HTTP requests never matches it, and the other way round.
 *
 * @param hits how many hits it adds: each matching policy is charged its {@code cost} times this (0 only looks)
 */
public record Descriptor(String domain, List<Entry> entries, long hits) implements ClientRequest {
    /** One entry: {@code remote_address = 10.0.0.7}. In a policy's pattern, a null value stands for any value. */
    public record Entry(String key, String value) {
        @Override
        public String toString() {
            return value == null ? key : key + "=" + value;
        }
    }

    public Descriptor {
        entries = List.copyOf(entries);
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
     * Whether {@code pattern} fits this descriptor: as many entries, the same keys in the same order, and the same
     * value wherever the pattern gives one.
     */
    public boolean fits(List<Entry> pattern) {
        if (pattern.size() != entries.size()) {
            return false;
        }
        for (int i = 0; i < pattern.size(); i++) {
            Entry wanted = pattern.get(i);
            Entry given = entries.get(i);
            if (!wanted.key().equals(given.key()) || wanted.value() != null && !wanted.value().equals(given.value())) {
                return false;
            }
        }
        return true;
    }

    /**
     * Which of two patterns that fit the same descriptor is the more specific, as Envoy's own service chooses: at
     * the first entry where one gives a value and the other does not, the one with the value. Positive when
     * {@code a} is the more specific, 0 when they are equally so.
     */
    public static int compareSpecificity(List<Entry> a, List<Entry> b) {
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            boolean aValued = a.get(i).value() != null;
            if (aValued != (b.get(i).value() != null)) {
                return aValued ? 1 : -1;
            }
        }
        return 0;
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
