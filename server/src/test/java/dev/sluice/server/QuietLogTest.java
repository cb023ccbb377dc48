package dev.sluice.server;

import dev.sluice.testkit.LogCapture;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** A line of each kind at most once a quiet; those left out counted on the next line of their kind. */
class QuietLogTest {
    @Test
    void eachKindIsSaidOnceAQuietAndItsNextLineCountsWhatWasLeftOut() throws Exception {
        String name = "sluice.quiet-test." + System.nanoTime();
        QuietLog log = new QuietLog(System.getLogger(name), System.Logger.Level.INFO, TimeUnit.MILLISECONDS.toNanos(300));
        try (LogCapture captured = LogCapture.of(name)) {
            for (int i = 0; i < 4; i++) {
                log.say("a", () -> "a happened", "a's");
            }
            log.say("b", () -> "b happened", "b's");
            assertThat(captured.messages()).containsExactly("a happened", "b happened");
            Thread.sleep(400);
            log.say("a", () -> "a happened again", "a's");
            log.say("b", () -> "b happened again", "b's");
            assertThat(captured.messages()).containsExactly("a happened", "b happened",
                    "a happened again (3 more a's since the last line, not logged)", "b happened again");
        }
        int[] made = {0};
        log.say("c", () -> "c " + ++made[0], "c's");
        log.say("c", () -> "c " + ++made[0], "c's");
        assertThat(made[0]).as("a line left out is never made").isEqualTo(1);
    }
}
