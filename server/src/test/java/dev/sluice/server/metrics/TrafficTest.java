package dev.sluice.server.metrics;

import dev.sluice.server.Checked;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/** The dashboard's traffic on a clock the test moves. */
class TrafficTest {
    private static final long MINUTE = 60_000;
    private final AtomicLong now = new AtomicLong(1_000 * MINUTE + 58_000);
    private final Traffic traffic = new Traffic(now::get);

    /**
     * A bug pinned: the busiest keys were those of the current minute alone, so they vanished at every turn of
     * the clock's minute (a test whose requests and read fell on either side of one found nothing).
     */
    @Test
    void theBusiestKeysOutliveTheTurnOfTheMinuteByOne() {
        traffic.record("p", "alice", Checked.Outcome.ALLOWED);
        traffic.record("p", "alice", Checked.Outcome.REJECTED);
        traffic.record("p", "bob", Checked.Outcome.ALLOWED);
        now.addAndGet(4_000); // the next minute
        assertThat(traffic.topKeys("p", 10)).containsExactly(new Traffic.KeyCount("alice", 2, 1),
                new Traffic.KeyCount("bob", 1, 0));
        traffic.record("p", "bob", Checked.Outcome.ALLOWED);
        traffic.record("p", "bob", Checked.Outcome.ALLOWED);
        assertThat(traffic.topKeys("p", 10)).as("summed over both minutes")
                .containsExactly(new Traffic.KeyCount("bob", 3, 0), new Traffic.KeyCount("alice", 2, 1));
        now.addAndGet(MINUTE);
        assertThat(traffic.topKeys("p", 10)).as("the first minute is gone").containsExactly(new Traffic.KeyCount("bob", 2, 0));
        now.addAndGet(MINUTE);
        assertThat(traffic.topKeys("p", 10)).isEmpty();
    }

    @Test
    void secondsCountWhatWasAdmittedAndRejected() {
        traffic.record("p", "alice", Checked.Outcome.ALLOWED);
        traffic.record("p", "alice", Checked.Outcome.REJECTED);
        now.addAndGet(1_000);
        traffic.record("p", "alice", Checked.Outcome.SHADOW_REJECTED);
        long second = now.get() / 1_000;
        assertThat(traffic.seconds("p", 3)).containsExactly(new Traffic.Second(second - 2, 0, 0),
                new Traffic.Second(second - 1, 1, 1), new Traffic.Second(second, 0, 1));
    }
}
