package dev.sluice.server.request;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PathGlobTest {
    @ParameterizedTest(name = "{0} on {1}: {2}")
    @CsvSource({
            "/api/**, /api, true",
            "/api/**, /api/, true",
            "/api/**, /api/items/7, true",
            "/api/**, /apix, false",
            "/api/**, /other/api, false",
            "/export/*, /export/report, true",
            "/export/*, /export/, true",
            "/export/*, /export/a/b, false",
            "/export/*, /export, false",
            "/login, /login, true",
            "/login, /login/, false",
            "/login, /LOGIN, false",
            "/v*/items, /v2/items, true",
            "/v*/items, /v2/x/items, false",
            "/**/health, /health, true",
            "/**/health, /a/b/health, true",
            "/**/health, /a/b/healthz, false",
            "/a.b/*, /a.b/c, true",
            "/a.b/*, /axb/c, false",
            "/**, /, true",
            "/**, /anything/at/all, true",
    })
    void matches(String glob, String path, boolean matches) {
        assertThat(PathGlob.compile(glob).matches(path)).isEqualTo(matches);
    }

    /** A past bug: ** matched no decoded line break, so /api/search/a%0Ab went uncharged by /api/**. */
    @org.junit.jupiter.api.Test
    void everyCharacterOfASegmentMatchesLineBreaksIncluded() {
        for (String odd : new String[] {"\n", "\r", "\u0085", "\u2028", "\u2029"}) {
            assertThat(PathGlob.compile("/api/**").matches("/api/search/a" + odd + "b")).as("%04x", (int) odd.charAt(0))
                    .isTrue();
            assertThat(PathGlob.compile("/api/*").matches("/api/a" + odd + "b")).isTrue();
            assertThat(PathGlob.compile("/**/login").matches("/x" + odd + "/login")).isTrue();
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "api/*|a path starts with /",
            "/api/**x|** must be a whole segment, as in /api/**",
            "/a**/b|** must be a whole segment, as in /api/**",
    })
    void refusesBadGlobs(String glob, String message) {
        assertThatThrownBy(() -> PathGlob.compile(glob)).isInstanceOf(IllegalArgumentException.class).hasMessage(message);
    }
}
