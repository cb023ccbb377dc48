package dev.sluice.server.request;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code trusted_proxies} of {@code sluice.yaml}: the networks (IPv4 or IPv6) allowed to say, in
 * {@code X-Forwarded-For}, whom they forward for. Anyone else could put any address there and so pick their
 * own rate limit key; their header is ignored and the connection's address is the client's.
 *
 * <p>Like nginx's {@code real_ip_recursive on}: the header is read from the right (the entry the nearest proxy
 * appended) and the first address that is not itself a trusted proxy is the client.
 */
public final class TrustedProxies {
    /** A network as written: an address, and optionally its prefix length. */
    private static final Pattern CIDR = Pattern.compile("([^/]+)(?:/(\\d{1,3}))?");
    /** An IPv4 address with a port, as RFC 3986 writes them ({@code 203.0.113.9:5555}). */
    private static final Pattern IPV4_PORT = Pattern.compile("([0-9.]+):(\\d{1,5})");
    /** An IPv6 address in brackets with a port ({@code [2001:db8::7]:443}). */
    private static final Pattern IPV6_PORT = Pattern.compile("\\[([^\\]]+)]:(\\d{1,5})");

    /** A network: its address's bytes (4 or 16), the leading bits that must match. */
    private record Network(byte[] address, int bits) {
        boolean contains(byte[] other) {
            if (other.length != address.length) {
                return false; // an IPv4-mapped client is given as IPv4 ({@link #canonical}), so never here as IPv6
            }
            int whole = bits / 8;
            for (int i = 0; i < whole; i++) {
                if (address[i] != other[i]) {
                    return false;
                }
            }
            int rest = bits % 8;
            return rest == 0 || ((address[whole] ^ other[whole]) & 0xFF & (0xFF << (8 - rest))) == 0;
        }
    }

    private final List<Network> networks;
    private final List<String> text;

    private TrustedProxies(List<Network> networks, List<String> text) {
        this.networks = networks;
        this.text = text;
    }

    public static final TrustedProxies NONE = new TrustedProxies(List.of(), List.of());

    /**
     * Reads networks such as {@code 10.0.0.0/8} or {@code 2001:db8::/32}, and single addresses; an
     * {@link IllegalArgumentException} names the bad one.
     */
    public static TrustedProxies of(List<String> cidrs) {
        List<Network> networks = new ArrayList<>();
        for (String cidr : cidrs) {
            Matcher matcher = CIDR.matcher(cidr);
            byte[] address = matcher.matches() ? bytes(matcher.group(1)) : null;
            if (address == null) {
                throw new IllegalArgumentException("expected a network such as 10.0.0.0/8 or 2001:db8::/32, or an"
                        + " address, got \"" + cidr + "\"");
            }
            // as written: an IPv6 network's, an IPv4-mapped one's (::ffff:10.0.0.0/104) too
            boolean six = matcher.group(1).indexOf(':') >= 0;
            int most = six ? 128 : 32;
            int written = matcher.group(2) == null ? most : Integer.parseInt(matcher.group(2));
            if (written > most) {
                throw new IllegalArgumentException("\"" + cidr + "\": an " + (six ? "IPv6" : "IPv4")
                        + " network has at most /" + most);
            }
            int bits = written;
            if (address.length == 4 && six) {
                // ::ffff:10.0.0.0/104, an IPv4-mapped network: the IPv4 one it maps, as its clients are given as IPv4
                bits = written - 96;
                if (bits < 0) {
                    throw new IllegalArgumentException("\"" + cidr + "\" maps IPv4 addresses only from /96 on: write"
                            + " the IPv4 network, such as 10.0.0.0/8");
                }
            }
            Network network = new Network(masked(address, bits), bits);
            if (!java.util.Arrays.equals(network.address(), address)) {
                // 10.0.0.1/8 trusts sixteen million addresses to set X-Forwarded-For, where one was most likely meant
                // (nginx warns of it; a review found it taken silently)
                throw new IllegalArgumentException("\"" + cidr + "\" has bits set past its /" + written
                        + ": write the network " + (six && address.length == 4 ? "::ffff:" : "")
                        + text(network.address()) + "/" + written + ", or " + matcher.group(1) + "/" + most
                        + " for the one address");
            }
            networks.add(network);
        }
        return new TrustedProxies(List.copyOf(networks), new ArrayList<>(cidrs));
    }

    /** {@code address} with every bit past the first {@code bits} cleared. */
    private static byte[] masked(byte[] address, int bits) {
        byte[] network = address.clone();
        for (int i = 0; i < network.length; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            network[i] = (byte) (network[i] & (0xFF << (8 - keep)));
        }
        return network;
    }

    /** An address's bytes as servers write it: dotted IPv4 as {@link #ipv4} reads it, IPv6 in Java's full form. */
    private static String text(byte[] address) {
        try {
            return java.net.InetAddress.getByAddress(address).getHostAddress();
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException(e); // 4 or 16 bytes: never
        }
    }

    /**
     * The bytes of an IP address written as {@link #isAddress} accepts it, 4 for IPv4 (an IPv4-mapped IPv6 address
     * included), 16 for IPv6; null for anything else.
     */
    private static byte[] bytes(String text) {
        Integer ipv4 = ipv4(text);
        return ipv4 != null ? java.nio.ByteBuffer.allocate(4).putInt(ipv4).array() : ipv6(text);
    }

    /** The networks as written. */
    public List<String> networks() {
        return List.copyOf(text);
    }

    public boolean trusts(String address) {
        if (networks.isEmpty()) {
            return false;
        }
        byte[] ip = bytes(unbracketed(address));
        if (ip == null) {
            return false;
        }
        for (Network network : networks) {
            if (network.contains(ip)) {
                return true;
            }
        }
        return false;
    }

    /**
     * The client of a connection from {@code remote} that carries {@code forwardedFor} (null when absent). An entry
     * may carry a port, as RFC 3986 writes it ({@code 203.0.113.9:5555}, {@code [2001:db8::7]:443}), which is left
     * out, as nginx's {@code realip} reads it. An entry met on the way that is not an address ({@code garbage})
     * makes the header worthless: the client is the connection's address, never a key made of junk.
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
                hop = withoutPort(hop);
                if (hop == null) {
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
     * The address of an entry of {@code X-Forwarded-For}: the entry itself, or without its port (a load balancer
     * that appends the client's port too: a review found every such client keyed as the proxy); null if it is none.
     */
    private static String withoutPort(String hop) {
        if (isAddress(unbracketed(hop))) {
            return hop;
        }
        Matcher port = IPV4_PORT.matcher(hop);
        if (port.matches() && ipv4(port.group(1)) != null && validPort(port.group(2))) {
            return port.group(1);
        }
        port = IPV6_PORT.matcher(hop);
        if (port.matches() && port.group(1).indexOf(':') >= 0 && isAddress(port.group(1)) && validPort(port.group(2))) {
            return port.group(1);
        }
        return null;
    }

    private static boolean validPort(String digits) {
        int port = Integer.parseInt(digits);
        return port >= 1 && port <= 65535;
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
        return ipv4(text) != null || ipv6(text) != null;
    }

    /** The bytes of the IPv6 literal {@code text} (4 for an IPv4-mapped one), or null when it is none. */
    private static byte[] ipv6(String text) {
        if (text.indexOf(':') < 0 || !text.chars().allMatch(c -> Character.digit(c, 16) >= 0 && c < 128 || c == ':' || c == '.')) {
            return null;
        }
        try {
            // only hex digits, colons and dots: Java parses it as a literal and never asks a resolver (it answers an
            // IPv4-mapped address, ::ffff:10.0.0.1, as the IPv4 one)
            return java.net.InetAddress.getByName(text).getAddress();
        } catch (java.net.UnknownHostException e) {
            return null;
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
