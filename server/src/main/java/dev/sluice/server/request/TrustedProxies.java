package dev.sluice.server.request;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code trusted_proxies} of {@code sluice.yaml}: the IPv4 networks allowed to say, in
 * {@code X-Forwarded-For}, whom they forward for. Anyone else could put any address there and so pick their
 * own rate limit key; their header is ignored and the connection's address is the client's.
 *
 * <p>Like nginx's {@code real_ip_recursive on}: the header is read from the right (the entry the nearest proxy
 * appended) and the first address that is not itself a trusted proxy is the client.
 */
public final class TrustedProxies {
    private static final Pattern CIDR = Pattern.compile("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})(?:/(\\d{1,2}))?");

    private final int[] networks;
    private final int[] masks;
    private final List<String> text;

    private TrustedProxies(int[] networks, int[] masks, List<String> text) {
        this.networks = networks;
        this.masks = masks;
        this.text = text;
    }

    public static final TrustedProxies NONE = new TrustedProxies(new int[0], new int[0], List.of());

    /** Reads networks such as {@code 10.0.0.0/8}; an {@link IllegalArgumentException} names the bad one. */
    public static TrustedProxies of(List<String> cidrs) {
        int[] networks = new int[cidrs.size()];
        int[] masks = new int[cidrs.size()];
        for (int i = 0; i < cidrs.size(); i++) {
            Matcher matcher = CIDR.matcher(cidrs.get(i));
            int bits = !matcher.matches() ? -1 : matcher.group(5) == null ? 32 : Integer.parseInt(matcher.group(5));
            Integer address = matcher.matches() ? ipv4(cidrs.get(i).split("/")[0]) : null;
            if (address == null || bits > 32) {
                throw new IllegalArgumentException("expected an IPv4 network such as 10.0.0.0/8, got \"" + cidrs.get(i) + "\"");
            }
            masks[i] = bits == 0 ? 0 : -1 << (32 - bits);
            networks[i] = address & masks[i];
        }
        return new TrustedProxies(networks, masks, new ArrayList<>(cidrs));
    }

    /** The networks as written. */
    public List<String> networks() {
        return List.copyOf(text);
    }

    public boolean trusts(String address) {
        Integer ip = ipv4(address);
        if (ip == null) {
            return false;
        }
        for (int i = 0; i < networks.length; i++) {
            if ((ip & masks[i]) == networks[i]) {
                return true;
            }
        }
        return false;
    }

    /** The client of a connection from {@code remote} that carries {@code forwardedFor} (null when absent). */
    public String client(String remote, List<String> forwardedFor) {
        if (forwardedFor.isEmpty() || !trusts(remote)) {
            return remote;
        }
        String client = remote;
        for (int h = forwardedFor.size() - 1; h >= 0; h--) {
            String[] hops = forwardedFor.get(h).split(",");
            for (int i = hops.length - 1; i >= 0; i--) {
                String hop = hops[i].trim();
                if (hop.isEmpty()) {
                    continue;
                }
                client = hop;
                if (!trusts(hop)) {
                    return hop;
                }
            }
        }
        return client;
    }

    /** The address as a 32-bit number, or null when it is not a dotted IPv4 address. */
    static Integer ipv4(String address) {
        String[] parts = address.split("\\.", -1);
        if (parts.length != 4) {
            return null;
        }
        int ip = 0;
        for (String part : parts) {
            if (part.isEmpty() || part.length() > 3 || !part.chars().allMatch(Character::isDigit)) {
                return null;
            }
            int octet = Integer.parseInt(part);
            if (octet > 255) {
                return null;
            }
            ip = ip << 8 | octet;
        }
        return ip;
    }
}
