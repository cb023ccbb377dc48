package dev.sluice;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DurationFormatTest {
    @ParameterizedTest
    @CsvSource({"1ms,1000000,1ms", "1500ms,1500000000,1500ms", "90s,90000000000,90s", "120s,120000000000,2m",
            "2h,7200000000000,2h", "24h,86400000000000,1d", "0s,0,0s", "7ns,7,7ns", "3us,3000,3us"})
    void parsesAndPrintsInTheLargestExactUnit(String text, long nanos, String printed) {
        assertThat(DurationFormat.parseNanos(text)).isEqualTo(nanos);
        assertThat(DurationFormat.format(nanos)).isEqualTo(printed);
    }

    @Test
    void refusesWhatIsNotAWholeNumberAndAUnit() {
        for (String bad : new String[] {"", "10", "1.5s", "-1s", "10 s", "10sec", "s10"}) {
            assertThatThrownBy(() -> DurationFormat.parseNanos(bad))
                    .hasMessage("bad duration \"" + bad + "\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s");
        }
        // from a review: a bare NullPointerException
        assertThatThrownBy(() -> DurationFormat.parseNanos(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a duration is required, as 10s or 500ms; got null");
    }

    @Test
    void roundsMillisecondsUpAndKeepsNever() {
        assertThat(DurationFormat.toMillisCeil(0)).isZero();
        assertThat(DurationFormat.toMillisCeil(1)).isEqualTo(1);
        assertThat(DurationFormat.toMillisCeil(1_000_000)).isEqualTo(1);
        assertThat(DurationFormat.toMillisCeil(1_000_001)).isEqualTo(2);
        assertThat(DurationFormat.toMillisCeil(Decision.NEVER)).isEqualTo(-1);
        assertThat(DurationFormat.toSecondsCeil(0)).isZero();
        assertThat(DurationFormat.toSecondsCeil(1)).isEqualTo(1);
        assertThat(DurationFormat.toSecondsCeil(1_000_000_000L)).isEqualTo(1);
        assertThat(DurationFormat.toSecondsCeil(1_000_000_001L)).isEqualTo(2);
        assertThat(DurationFormat.toSecondsCeil(Decision.NEVER)).isEqualTo(-1);
    }
}
