package dev.sluice.server.config;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** What reaches a terminal of a value quoted in a message. */
class TerminalTextTest {
    @Test
    void controlAndInvisibleCharactersAreWrittenAsEscapesAndLettersStay() {
        assertThat(TerminalText.of("café ünïcode 世界")).isEqualTo("café ünïcode 世界");
        assertThat(TerminalText.of("a\u001b[2K\rb\n\u0000\u0085")).isEqualTo("a\\x1b[2K\\x0db\\x0a\\x00\\x85");
        // a bidi override reorders what follows it; a line separator breaks the line (a review found both kept)
        assertThat(TerminalText.of("key\u202Egnp.exe\u2066x\u2069\u2028y")).isEqualTo("key\\u202egnp.exe\\u2066x\\u2069\\u2028y");
        assertThat(TerminalText.of("a\uDB40\uDC41b 😀")).as("a tag past the BMP; an emoji stays").isEqualTo("a\\U000e0041b 😀");
        assertThat(TerminalText.of(null)).isNull();
    }
}
