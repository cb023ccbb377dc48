package dev.sluice.server.request;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TrustedProxiesTest {
    private final TrustedProxies proxies = TrustedProxies.of(List.of("10.0.0.0/8", "192.168.1.7/32", "172.16.0.1"));

    @Test
    void knowsItsNetworks() {
        assertThat(proxies.trusts("10.255.3.4")).isTrue();
        assertThat(proxies.trusts("11.0.0.1")).isFalse();
        assertThat(proxies.trusts("192.168.1.7")).isTrue();
        assertThat(proxies.trusts("192.168.1.8")).isFalse();
        assertThat(proxies.trusts("172.16.0.1")).as("an address alone is a /32").isTrue();
        assertThat(proxies.trusts("::1")).isFalse();
        assertThat(proxies.trusts("10.0.0")).isFalse();
        assertThat(TrustedProxies.of(List.of("0.0.0.0/0")).trusts("203.0.113.1")).isTrue();
    }

    @Test
    void theClientIsTheRightmostAddressThatIsNotATrustedProxy() {
        assertThat(proxies.client("10.0.0.1", List.of("203.0.113.9"))).isEqualTo("203.0.113.9");
        assertThat(proxies.client("10.0.0.1", List.of("198.51.100.1, 203.0.113.9, 10.0.0.2"))).isEqualTo("203.0.113.9");
        assertThat(proxies.client("10.0.0.1", List.of("198.51.100.1", "203.0.113.9"))).as("two header lines").isEqualTo("203.0.113.9");
        assertThat(proxies.client("10.0.0.1", List.of("10.0.0.3, 10.0.0.2"))).as("all trusted: the farthest").isEqualTo("10.0.0.3");
        assertThat(proxies.client("10.0.0.1", List.of())).isEqualTo("10.0.0.1");
        assertThat(proxies.client("10.0.0.1", List.of(" , "))).isEqualTo("10.0.0.1");
    }

    /**
     * Found by trying the servlet filter: Jetty 12 gives an IPv6 client in brackets, the gateway in Java's full
     * form, a proxy may write it short; one client was counted under two keys. Each is written one way.
     */
    @Test
    void anIpv6ClientIsOneKeyHoweverItIsWritten() {
        for (String written : List.of("[0:0:0:0:0:0:0:1]", "::1", "0:0:0:0:0:0:0:1", "[::1]")) {
            assertThat(proxies.client(written, List.of())).as(written).isEqualTo("0:0:0:0:0:0:0:1");
        }
        assertThat(proxies.client("10.0.0.1", List.of("2001:db8::7"))).isEqualTo("2001:db8:0:0:0:0:0:7");
        // found by checking the docs against the gateway: in X-Forwarded-For, [::1] was junk, the header worthless
        assertThat(proxies.client("10.0.0.1", List.of("[2001:db8::7]"))).as("in brackets, forwarded")
                .isEqualTo("2001:db8:0:0:0:0:0:7");
        assertThat(proxies.client("10.0.0.1", List.of("[2001:db8::7]:443"))).as("with a port, left out")
                .isEqualTo("2001:db8:0:0:0:0:0:7");
        assertThat(proxies.client("10.0.0.1", List.of("2001:db8::7:443"))).as("no brackets: all of it the address")
                .isEqualTo("2001:db8:0:0:0:0:7:443");
        assertThat(proxies.client("10.0.0.1", List.of("[]"))).isEqualTo("10.0.0.1");
        // a review found [10.0.0.5] taken for a client of its own, "[10.0.0.5]", and never trusted
        assertThat(proxies.client("10.0.0.1", List.of("203.0.113.9, [10.0.0.5]"))).as("IPv4 in brackets: junk")
                .isEqualTo("10.0.0.1");
        assertThat(proxies.client("::ffff:203.0.113.9", List.of())).as("IPv4-mapped").isEqualTo("203.0.113.9");
        assertThat(proxies.client("203.0.113.9", List.of())).isEqualTo("203.0.113.9");
        assertThat(TrustedProxies.canonical("fe80::1%eth0")).as("not a plain literal: as it is").isEqualTo("fe80::1%eth0");
    }

    /**
     * An entry with a port, as RFC 3986 writes it and some load balancers append it, is the address it names, as
     * nginx's {@code realip} reads it. A past weakness: the whole header was taken for junk, and every such client
     * keyed as the proxy (found by a review from nginx's side).
     */
    @Test
    void anEntryWithAPortIsItsAddress() {
        assertThat(proxies.client("10.0.0.1", List.of("1.2.3.4:5555"))).isEqualTo("1.2.3.4");
        assertThat(proxies.client("10.0.0.1", List.of("198.51.100.1, 203.0.113.9:40000, 10.0.0.2:80")))
                .as("a trusted proxy's entry with its port is passed over too").isEqualTo("203.0.113.9");
        for (String junk : List.of("1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:", "1.2.3.4:http", "[1.2.3.4]:80",
                "010.0.0.1:80", "[::1]:", "[::1]:99999", "host:80")) {
            assertThat(proxies.client("10.0.0.1", List.of(junk))).as(junk).isEqualTo("10.0.0.1");
        }
    }

    @Test
    void anEntryThatIsNotAnAddressMakesTheHeaderWorthless() {
        // never a key made of junk
        assertThat(proxies.client("10.0.0.1", List.of("garbage"))).isEqualTo("10.0.0.1");
        assertThat(proxies.client("10.0.0.1", List.of("1.2.3.4, junk"))).isEqualTo("10.0.0.1");
        assertThat(proxies.client("10.0.0.1", List.of("junk, 203.0.113.9"))).as("the client's own junk is never reached")
                .isEqualTo("203.0.113.9");
        assertThat(proxies.client("10.0.0.1", List.of("2001:db8::7"))).as("an address, written in full").isEqualTo("2001:db8:0:0:0:0:0:7");
        assertThat(TrustedProxies.isAddress("::ffff:10.0.0.1")).isTrue();
        assertThat(TrustedProxies.isAddress("localhost")).isFalse();
        assertThat(TrustedProxies.isAddress("dead:beef:cafe")).isFalse();
        assertThat(TrustedProxies.isAddress("")).isFalse();
        // a leading zero: another key than the 10.0.0.7 every server writes (a review found it)
        assertThat(TrustedProxies.isAddress("10.0.0.07")).isFalse();
        assertThat(TrustedProxies.isAddress("10.0.0.0")).isTrue();
        assertThat(proxies.client("10.0.0.1", List.of("203.0.113.09"))).isEqualTo("10.0.0.1");
        // digits of other scripts are not an address, though Integer.parseInt reads them as 127
        assertThat(TrustedProxies.isAddress("\u0661\u0662\u0667.0.0.1")).isFalse();
        assertThat(proxies.client("10.0.0.1", List.of("\u0661\u0662\u0667.0.0.1"))).isEqualTo("10.0.0.1");
    }

    @org.junit.jupiter.api.Test
    void anUntrustedPeerCannotChooseItsKey() {
        assertThat(proxies.client("203.0.113.50", List.of("1.2.3.4"))).isEqualTo("203.0.113.50");
        assertThat(TrustedProxies.NONE.client("10.0.0.1", List.of("1.2.3.4"))).isEqualTo("10.0.0.1");
    }

    /**
     * IPv6 proxies, as nginx's {@code set_real_ip_from 2001:0db8::/32}: a dual-stack load balancer, a proxy on
     * {@code ::1}. A past weakness: only IPv4 networks could be trusted.
     */
    @Test
    void trustsIpv6Networks() {
        TrustedProxies six = TrustedProxies.of(List.of("2001:db8::/32", "::1", "fd00:1:2::/47", "::ffff:192.0.2.0/120"));
        assertThat(six.trusts("2001:db8:ffff::1")).isTrue();
        assertThat(six.trusts("2001:db9::1")).isFalse();
        assertThat(six.trusts("0:0:0:0:0:0:0:1")).as("a single address, in Java's form").isTrue();
        assertThat(six.trusts("[::1]")).isTrue();
        assertThat(six.trusts("::2")).isFalse();
        assertThat(six.trusts("fd00:1:3::9")).as("/47: the last bit of the third group is free").isTrue();
        assertThat(six.trusts("fd00:1:4::9")).isFalse();
        assertThat(six.trusts("192.0.2.77")).as("an IPv4-mapped network is its IPv4 one").isTrue();
        assertThat(six.trusts("192.0.3.77")).isFalse();
        assertThat(six.trusts("10.0.0.1")).isFalse();
        assertThat(proxies.trusts("::1")).as("IPv4 networks never hold an IPv6 address").isFalse();
        assertThat(six.client("::1", List.of("203.0.113.9, 2001:db8::5"))).isEqualTo("203.0.113.9");
        assertThat(six.client("0:0:0:0:0:0:0:1", List.of("[2001:db9::5]:443"))).isEqualTo("2001:db9:0:0:0:0:0:5");
        assertThat(TrustedProxies.of(List.of("::/0")).trusts("2001:db8::1")).isTrue();
        assertThat(TrustedProxies.of(List.of("::/0")).trusts("10.0.0.1")).as("::/0 is IPv6's").isFalse();
    }

    @Test
    void refusesWhatIsNotANetwork() {
        for (String bad : List.of("256.0.0.0/8", "10.0.0/8", "ten", "010.0.0.0/8", "10.0.0.0/", "fe80::1%eth0",
                "dead:beef:cafe/48", "[::1]/128")) {
            assertThatThrownBy(() -> TrustedProxies.of(List.of(bad))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("expected a network such as 10.0.0.0/8 or 2001:db8::/32, or an address, got \"" + bad
                            + "\"");
        }
        assertThatThrownBy(() -> TrustedProxies.of(List.of("10.0.0.0/33")))
                .hasMessage("\"10.0.0.0/33\": an IPv4 network has at most /32");
        assertThatThrownBy(() -> TrustedProxies.of(List.of("2001:db8::/129")))
                .hasMessage("\"2001:db8::/129\": an IPv6 network has at most /128");
        assertThatThrownBy(() -> TrustedProxies.of(List.of("2001:db8::1/32"))).hasMessage("\"2001:db8::1/32\" has bits"
                + " set past its /32: write the network 2001:db8:0:0:0:0:0:0/32, or 2001:db8::1/128 for the one address");
        assertThatThrownBy(() -> TrustedProxies.of(List.of("10.0.0.1/8"))).hasMessage("\"10.0.0.1/8\" has bits set"
                + " past its /8: write the network 10.0.0.0/8, or 10.0.0.1/32 for the one address");
        assertThatThrownBy(() -> TrustedProxies.of(List.of("::ffff:10.0.0.1/104"))).hasMessage("\"::ffff:10.0.0.1/104\""
                + " has bits set past its /104: write the network ::ffff:10.0.0.0/104, or ::ffff:10.0.0.1/128 for the one"
                + " address");
        assertThat(TrustedProxies.of(List.of("::ffff:10.0.0.1/128")).trusts("10.0.0.1")).isTrue();
        assertThatThrownBy(() -> TrustedProxies.of(List.of("::ffff:10.0.0.0/129")))
                .hasMessage("\"::ffff:10.0.0.0/129\": an IPv6 network has at most /128");
        assertThatThrownBy(() -> TrustedProxies.of(List.of("::ffff:10.0.0.0/64")))
                .hasMessage("\"::ffff:10.0.0.0/64\" maps IPv4 addresses only from /96 on: write the IPv4 network, such"
                        + " as 10.0.0.0/8");
    }
}
