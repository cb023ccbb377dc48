package dev.sluice.server.request;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;

/** {@link ClientRequest#servedPath}: the path policies match, as nginx's {@code $uri} would be. */
class ServedPathTest {
    @ParameterizedTest(name = "{0} → {1}")
    @CsvSource(delimiter = '|', value = {
            "/api/items|/api/items",
            "/api/|/api/",
            "/|/",
            "//api/items|/api/items",
            "/api//items//|/api/items/",
            "/./api/items|/api/items",
            "/v1/../api/items|/api/items",
            "/../../api/items|/api/items",
            "/api/items/.|/api/items/",
            "/api/items/..|/api/",
            "/%61pi/items|/api/items",
            "/%2E%2E/api|/api",
            "/api%2Fitems|/api/items",
            "/caf%C3%A9|/café",
            "/100%|/100%",
            "/a%zzb|/a%zzb",
            "/a%4|/a%4",
            "/.well-known/x|/.well-known/x",
            "/a..b/c|/a..b/c",
            "/api;v=1/items|/api/items",
            "/public/..;/api/items|/api/items",
            "/api/items;jsessionid=x|/api/items",
            "api/items|/api/items",
            "*|/*",
            "/%\uFF16\uFF11pi|/%\uFF16\uFF11pi",
            "/caf\u00e9/%2e|/caf\u00e9/",
    })
    void isWhatAServerServes(String raw, String served) {
        assertThat(ClientRequest.servedPath(raw)).isEqualTo(served);
    }
}
