package dev.sluice;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LimitTest {
    @ParameterizedTest
    @CsvSource(delimiter = ';', value = {
            "600/1m; 600; 60000000000; 600; GREEDY; 600/1m",
            "10/60s; 10; 60000000000; 10; GREEDY; 10/1m",
            "3600/1h; 3600; 3600000000000; 3600; GREEDY; 3600/1h",
            "5/500ms; 5; 500000000; 5; GREEDY; 5/500ms",
            "1/1d; 1; 86400000000000; 1; GREEDY; 1/1d",
            "10/s; 10; 1000000000; 10; GREEDY; 10/1s",
            "100/1m burst=150; 100; 60000000000; 150; GREEDY; 100/1m burst=150",
            "3/1m refill=interval; 3; 60000000000; 3; INTERVAL; 3/1m refill=interval",
            "3/1m  burst=3 refill=greedy; 3; 60000000000; 3; GREEDY; 3/1m",
    })
    void parsesAndPrints(String text, long amount, long periodNanos, long burst, Refill refill, String printed) {
        Limit limit = Limit.parse(text);
        assertThat(limit).isEqualTo(new Limit(amount, periodNanos, burst, refill));
        assertThat(limit.toString()).isEqualTo(printed);
        assertThat(Limit.parse(printed)).isEqualTo(limit);
    }

    @ParameterizedTest
    @CsvSource(delimiter = ';', value = {
            "10/0s; bad limit \"10/0s\": period must be > 0, got \"0s\"",
            "0/1m; bad limit \"0/1m\": amount must be between 1 and 1099511627776, got 0",
            "abc; bad limit \"abc\": expected L/P such as 600/1m",
            "10/; bad limit \"10/\": expected L/P such as 600/1m",
            "/1m; bad limit \"/1m\": expected L/P such as 600/1m",
            "-1/1m; bad limit \"-1/1m\": amount must be a whole number >= 1, got \"-1\"",
            "1.5/1m; bad limit \"1.5/1m\": amount must be a whole number >= 1, got \"1.5\"",
            "10/1w; bad limit \"10/1w\": bad duration \"1w\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
            "99999999999999999999/1m; bad limit \"99999999999999999999/1m\": amount must be between 1 and 1099511627776, got 99999999999999999999",
            "10/99999d; bad limit \"10/99999d\": duration \"99999d\" is too long (at most 3335d)",
            "10/1m burst=0; bad limit \"10/1m burst=0\": burst must be between 1 and 1099511627776, got 0",
            "10/1m refill=sometimes; bad limit \"10/1m refill=sometimes\": unknown refill \"sometimes\": expected greedy or interval",
            "10/1m jitter=1; bad limit \"10/1m jitter=1\": unknown option \"jitter=1\": expected burst=B or refill=greedy|interval",
            "10/1m burst=5 burst=7; bad limit \"10/1m burst=5 burst=7\": burst is given twice",
            "10/1m refill=greedy refill=interval; bad limit \"10/1m refill=greedy refill=interval\": refill is given twice",
            "\u0665/1s; bad limit \"\u0665/1s\": amount must be a whole number >= 1, got \"\u0665\"",
            "10/\uFF11s; bad limit \"10/\uFF11s\": bad duration \"\uFF11s\": expected a whole number and a unit (ns, us, ms, s, m, h, d) such as 10s",
    })
    void refusesBadTextNamingIt(String text, String message) {
        assertThatThrownBy(() -> Limit.parse(text)).isInstanceOf(IllegalArgumentException.class).hasMessage(message);
    }

    @Test
    void refusesBadValues() {
        assertThatThrownBy(() -> Limit.of(0, Duration.ofSeconds(1)))
                .hasMessage("limit amount must be between 1 and 1099511627776, got 0");
        assertThatThrownBy(() -> Limit.of(1, Duration.ZERO)).hasMessageStartingWith("limit period must be > 0");
        assertThatThrownBy(() -> Limit.of(1, Duration.ofSeconds(1)).withBurst(-5))
                .hasMessage("limit burst must be between 1 and 1099511627776, got -5");
    }
}
