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

    /** spec/server.md: serve and gateway listen on port 8080 unless told, on every interface. */
    @org.junit.jupiter.api.Test
    void servesOnPort8080OfEveryInterfaceUnlessTold() {
        java.io.PrintWriter out = new java.io.PrintWriter(java.io.Writer.nullWriter());
        ServeCommand serve = new ServeCommand(out);
        GatewayCommand gateway = new GatewayCommand(out);
        new picocli.CommandLine(serve).parseArgs();
        new picocli.CommandLine(gateway).parseArgs("--upstream", "http://127.0.0.1:3000");
        for (ServiceOptions options : java.util.List.of(serve.options, gateway.options)) {
            assertThat(options.port).isEqualTo(8080);
            assertThat(options.host).isEqualTo("0.0.0.0");
        }
    }
}
