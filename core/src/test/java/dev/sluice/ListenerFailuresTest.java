package dev.sluice;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A listener failing at every decision wrote a stack trace per decision (a review). The first failure of a listener's
 * class is logged with its stack trace, then one line a minute at most, counting those left out; every decision
 * stands.
 */
class ListenerFailuresTest {
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();
    private final Handler capture = new Handler() {
        @Override
        public void publish(LogRecord record) {
            records.add(record);
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    private List<LogRecord> logged(Runnable during) {
        Logger logger = Logger.getLogger(RateLimiter.class.getName());
        logger.addHandler(capture);
        try {
            during.run();
        } finally {
            logger.removeHandler(capture);
        }
        return records;
    }

    @Test
    void aListenerFailingAtEveryDecisionIsLoggedOnceAndTheDecisionsStand() {
        DecisionListener broken = new DecisionListener() {
            @Override
            public void admitted(String key, long cost, Decision decision) {
                throw new IllegalStateException("a broken metrics sink");
            }
        };
        long[] admitted = {0};
        List<LogRecord> said = logged(() -> {
            for (int i = 0; i < 500; i++) {
                // a limiter made anew for each request, as some applications write it: still one line
                RateLimiter limiter = RateLimiter.builder().algorithm(Algorithm.FIXED_WINDOW).limit("1000/1h")
                        .listener(broken).build();
                admitted[0] += limiter.tryAcquire("k").allowed() ? 1 : 0;
            }
        });
        assertThat(admitted[0]).isEqualTo(500);
        assertThat(said).hasSize(1);
        assertThat(said.get(0).getMessage()).isEqualTo("a decision listener failed; the decision stands");
        assertThat(said.get(0).getThrown()).hasMessage("a broken metrics sink");
    }

    @Test
    void aLineAMinuteAtMostCountingThoseLeftOut() {
        AtomicLong now = new AtomicLong(5);
        ListenerFailures failures = new ListenerFailures(now::get);
        List<LogRecord> said = logged(() -> {
            failures.failed(new IllegalStateException("first"));
            for (int i = 0; i < 3; i++) {
                now.addAndGet(TimeUnit.SECONDS.toNanos(10));
                failures.failed(new IllegalStateException("left out"));
            }
            now.set(5 + ListenerFailures.QUIET_NANOS - 1);
            failures.failed(new IllegalStateException("left out, 1 ns short of a minute"));
            now.set(5 + ListenerFailures.QUIET_NANOS);
            failures.failed(new IllegalStateException("a minute after the first"));
            now.addAndGet(ListenerFailures.QUIET_NANOS);
            failures.failed(new IllegalStateException("another minute on"));
        });
        assertThat(said).extracting(LogRecord::getMessage).containsExactly(
                "a decision listener failed; the decision stands",
                "a decision listener failed; the decision stands (4 more failures of listeners since the last line, not"
                        + " logged: one line a minute at most)",
                "a decision listener failed; the decision stands");
        assertThat(said).extracting(record -> record.getThrown().getMessage())
                .containsExactly("first", "a minute after the first", "another minute on");
    }
}
