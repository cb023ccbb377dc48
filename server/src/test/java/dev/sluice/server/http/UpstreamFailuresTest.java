package dev.sluice.server.http;

import dev.sluice.testkit.LogCapture;
import org.junit.jupiter.api.Test;

import java.io.IOException;

import static org.assertj.core.api.Assertions.assertThat;

/** The reasons of the gateway's 502s in the log: each said, an upstream that fails every request not said each time. */
class UpstreamFailuresTest {
    @Test
    void aReasonRepeatedIsLoggedOnceAndAnotherAtOnce() {
        String down = "connection refused " + System.nanoTime();
        String other = "reset " + System.nanoTime();
        UpstreamFailures reasons = new UpstreamFailures();
        try (LogCapture log = LogCapture.of("sluice")) {
            for (int i = 0; i < 3; i++) {
                reasons.failed(new IOException(down));
            }
            reasons.failed(new IOException(other));
            reasons.failed(new IOException(other));
            assertThat(log.messages()).containsExactly("gateway: the upstream failed, answered 502: " + down,
                    "gateway: the upstream failed, answered 502: " + other);
        }
    }
}
