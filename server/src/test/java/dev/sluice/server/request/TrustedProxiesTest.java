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
        assertThat(proxies.client("10.0.0.1", List.of("[2001:db8::7]:443"))).as("with a port: junk, as 1.2.3.4:5555")
                .isEqualTo("10.0.0.1");
        assertThat(proxies.client("10.0.0.1", List.of("[]"))).isEqualTo("10.0.0.1");
        // a review found [10.0.0.5] taken for a client of its own, "[10.0.0.5]", and never trusted
        assertThat(proxies.client("10.0.0.1", List.of("203.0.113.9, [10.0.0.5]"))).as("IPv4 in brackets: junk")
                .isEqualTo("10.0.0.1");
        assertThat(proxies.client("::ffff:203.0.113.9", List.of())).as("IPv4-mapped").isEqualTo("203.0.113.9");
        assertThat(proxies.client("203.0.113.9", List.of())).isEqualTo("203.0.113.9");
        assertThat(TrustedProxies.canonical("fe80::1%eth0")).as("not a plain literal: as it is").isEqualTo("fe80::1%eth0");
    }

    @Test
    void anEntryThatIsNotAnAddressMakesTheHeaderWorthless() {
        // as nginx's realip declines it: never a key made of junk
        assertThat(proxies.client("10.0.0.1", List.of("garbage"))).isEqualTo("10.0.0.1");
        assertThat(proxies.client("10.0.0.1", List.of("1.2.3.4:5555"))).isEqualTo("10.0.0.1");
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

    @Test
    void refusesWhatIsNotAnIpv4Network() {
        for (String bad : List.of("10.0.0.0/33", "256.0.0.0/8", "10.0.0/8", "fe80::/10", "ten", "010.0.0.0/8")) {
            assertThatThrownBy(() -> TrustedProxies.of(List.of(bad))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("expected an IPv4 network such as 10.0.0.0/8, got \"" + bad + "\"");
        }
    }
}
