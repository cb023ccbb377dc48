package dev.sluice.server.request;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The walk of a descriptor through the patterns of its domain, as Envoy's own service walks its tree. */
class DescriptorTest {
    /** A pattern from {@code "a=1 b"}: entries split on spaces, KEY or KEY=VALUE. */
    private static List<Descriptor.Entry> pattern(String text) {
        List<Descriptor.Entry> entries = new ArrayList<>();
        for (String entry : text.split(" ")) {
            int equals = entry.indexOf('=');
            entries.add(equals < 0 ? new Descriptor.Entry(entry, null)
                    : new Descriptor.Entry(entry.substring(0, equals), entry.substring(equals + 1)));
        }
        return List.copyOf(entries);
    }

    private static Descriptor asked(String text) {
        return new Descriptor("edge", pattern(text), 1);
    }

    private static List<Descriptor.Entry> walk(String descriptor, String... patterns) {
        return asked(descriptor).walk(java.util.Arrays.stream(patterns).map(DescriptorTest::pattern).toList());
    }

    @Test
    void aValueNamedBeatsAWildcardWhichBeatsAnyValue() {
        String[] patterns = {"plan", "plan=pre*", "plan=premium"};
        assertThat(walk("plan=premium", patterns)).isEqualTo(pattern("plan=premium"));
        assertThat(walk("plan=premier", patterns)).isEqualTo(pattern("plan=pre*"));
        assertThat(walk("plan=basic", patterns)).isEqualTo(pattern("plan"));
        assertThat(walk("plan=pre", patterns)).as("the prefix itself").isEqualTo(pattern("plan=pre*"));
    }

    @Test
    void ofTwoWildcardsThatTakeAValueTheFirstInOrderIsFollowed() {
        assertThat(walk("plan=premium-gold", "plan=prem*", "plan=premium-*")).isEqualTo(pattern("plan=prem*"));
        assertThat(walk("plan=premium-gold", "plan=premium-*", "plan=prem*")).isEqualTo(pattern("plan=premium-*"));
        // followed even when only the other leads somewhere
        assertThat(walk("plan=premium-gold tier=1", "plan=premium-* user", "plan=prem* tier")).isNull();
    }

    @Test
    void theWalkNeverTurnsBack() {
        assertThat(walk("a=1 b=3", "a=1 b=2", "a b")).isNull();
        assertThat(walk("a=2 b=3", "a=1 b=2", "a b")).isEqualTo(pattern("a b"));
        assertThat(walk("a=1 b=2", "a=1 b=2", "a b")).isEqualTo(pattern("a=1 b=2"));
    }

    @Test
    void onlyAPatternAsLongAsTheDescriptorDecidesIt() {
        String[] patterns = {"a", "a b", "a b c"};
        assertThat(walk("a=1", patterns)).isEqualTo(pattern("a"));
        assertThat(walk("a=1 b=2", patterns)).isEqualTo(pattern("a b"));
        assertThat(walk("a=1 b=2 c=3 d=4", patterns)).isNull();
        assertThat(walk("b=2", patterns)).as("keys in their order").isNull();
        assertThat(walk("a=1", new String[0])).isNull();
    }

    @Test
    void anEmptyValueIsTakenOnlyByAnyValueOrAnEmptyPrefix() {
        assertThat(walk("a=", "a=x", "a")).isEqualTo(pattern("a"));
        assertThat(walk("a=", "a=x", "a=*")).isEqualTo(pattern("a=*"));
        assertThat(walk("a=", "a=x")).isNull();
    }

    @Test
    void fitsTakesWildcardsToo() {
        assertThat(asked("plan=premium-gold").fits(pattern("plan=premium*"))).isTrue();
        assertThat(asked("plan=basic").fits(pattern("plan=premium*"))).isFalse();
        assertThat(asked("plan=basic").fits(pattern("plan"))).isTrue();
        assertThat(asked("plan=basic user=u").fits(pattern("plan"))).isFalse();
    }

    @Test
    void twoDescriptorsHaveTheSameTextOnlyIfTheyHaveTheSameDomainAndEntries() {
        Descriptor one = new Descriptor("edge", List.of(new Descriptor.Entry("a", "1|b")), 1);
        Descriptor two = new Descriptor("edge", List.of(new Descriptor.Entry("a", "1"), new Descriptor.Entry("b", "")), 1);
        Descriptor three = new Descriptor("edge", List.of(new Descriptor.Entry("a|1", "b")), 1);
        assertThat(one.text()).isEqualTo("edge|a|1%7Cb");
        assertThat(two.text()).isEqualTo("edge|a|1|b|");
        assertThat(three.text()).isEqualTo("edge|a%7C1|b");
        assertThat(asked("a=1 b=2").text()).isEqualTo(asked("a=1 b=2").text()).isNotEqualTo(asked("b=2 a=1").text());
        // domains a name would make alike ("a b" and "a_b/override") stay apart
        assertThat(new Descriptor("a b", List.of(new Descriptor.Entry("k", "v")), 1).text())
                .isNotEqualTo(new Descriptor("a_b", List.of(new Descriptor.Entry("k", "v")), 1).text());
    }
}
