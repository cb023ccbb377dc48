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
            if (networks[i] != address) {
                // 10.0.0.1/8 trusts sixteen million addresses to set X-Forwarded-For, where one was most likely meant
                // (nginx warns of it; a review found it taken silently)
                throw new IllegalArgumentException("\"" + cidrs.get(i) + "\" has bits set past its /" + bits
                        + ": write the network " + ipv4Text(networks[i]) + "/" + bits + ", or "
                        + cidrs.get(i).split("/")[0] + "/32 for the one address");
            }
        }
        return new TrustedProxies(networks, masks, new ArrayList<>(cidrs));
    }

    private static String ipv4Text(int address) {
        return (address >>> 24) + "." + (address >>> 16 & 0xFF) + "." + (address >>> 8 & 0xFF) + "." + (address & 0xFF);
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

    /**
     * The client of a connection from {@code remote} that carries {@code forwardedFor} (null when absent). An entry
     * met on the way that is not an address ({@code garbage}, {@code 1.2.3.4:5555}) makes the header worthless, as
     * nginx's {@code realip} declines it: the client is the connection's address, never a key made of junk.
     */
    public String client(String remote, List<String> forwardedFor) {
        remote = canonical(remote);
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
                if (!isAddress(unbracketed(hop))) {
                    return remote;
                }
                hop = canonical(hop);
                client = hop;
                if (!trusts(hop)) {
                    return hop;
                }
            }
        }
        return client;
    }

    /**
     * {@code address} as every server writes it, so that one client is one {@code ip} key whoever received it: an
     * IPv6 address in Java's full form ({@code 0:0:0:0:0:0:0:1}, as Netty and Tomcat give it; Jetty 12 gives it in
     * brackets, and a proxy may write {@code ::1}: found by trying the servlet filter, one client counted under two
     * keys), an IPv4-mapped one as IPv4; anything else as it is.
     */
    public static String canonical(String address) {
        if (address == null || address.indexOf(':') < 0) {
            return address; // IPv4, nearly always: nothing to do
        }
        String bare = unbracketed(address);
        if (!isAddress(bare)) {
            return address;
        }
        try {
            return java.net.InetAddress.getByName(bare).getHostAddress(); // a literal: no name is looked up
        } catch (java.net.UnknownHostException e) {
            return address;
        }
    }

    /**
     * {@code address} without the brackets an IPv6 address may be written in ({@code [::1]}: {@code ::1}); anything
     * else as it is ({@code [10.0.0.7]} is no way to write an IPv4 address: left so, it is no address).
     */
    public static String unbracketed(String address) {
        return address.length() > 2 && address.startsWith("[") && address.endsWith("]") && address.indexOf(':') > 0
                ? address.substring(1, address.length() - 1) : address;
    }

    /** Whether {@code text} is an IP address: dotted IPv4, or an IPv6 literal (read without any name lookup). */
    public static boolean isAddress(String text) {
        if (ipv4(text) != null) {
            return true;
        }
        if (text.indexOf(':') < 0 || !text.chars().allMatch(c -> Character.digit(c, 16) >= 0 && c < 128 || c == ':' || c == '.')) {
            return false;
        }
        try {
            // only hex digits, colons and dots: Java parses it as a literal and never asks a resolver (it answers an
            // IPv4-mapped address, ::ffff:10.0.0.1, as the IPv4 one)
            java.net.InetAddress.getByName(text);
            return true;
        } catch (java.net.UnknownHostException e) {
            return false;
        }
    }

    /** The address as a 32-bit number, or null when it is not a dotted IPv4 address written as servers write it. */
    static Integer ipv4(String address) {
        String[] parts = address.split("\\.", -1);
        if (parts.length != 4) {
            return null;
        }
        int ip = 0;
        for (String part : parts) {
            if (part.isEmpty() || part.length() > 3 || !part.chars().allMatch(c -> c >= '0' && c <= '9')
                    || part.length() > 1 && part.charAt(0) == '0') {
                // no leading zero: 10.0.0.07 would be a key apart from the 10.0.0.7 every server gives, and 010 is 8 to
                // parsers that read it as octal (a review found the first)
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
