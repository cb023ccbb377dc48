package dev.sluice.cli;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;

/** The address {@code serve} and {@code gateway} print: where a client on this machine reaches them. */
class ServiceOptionsTest {
    @ParameterizedTest(name = "--host {0} → {1}")
    @CsvSource({
            "0.0.0.0, localhost",
            "::, localhost",
            "[::], localhost",
            "127.0.0.1, 127.0.0.1",
            "10.1.2.3, 10.1.2.3",
            "::1, [::1]",
            "[::1], [::1]",
            "api.internal, api.internal",
    })
    void printsTheAddressItListensOnUnlessItIsEveryInterface(String host, String printed) {
        assertThat(ServiceOptions.reachableAt(host)).isEqualTo(printed);
    }
}
