package dev.sluice.store;

import dev.sluice.Algorithm;
import dev.sluice.Decision;
import dev.sluice.Limit;
import dev.sluice.algorithm.Rule;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class InMemoryStoreTest {
    private static final long S = 1_000_000_000L;
    private static final long T0 = 1_700_000_000L * S; // a multiple of every window below
    private static final Rule ONE_PER_SECOND = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1s")));

    @Test
    void dropsKeysOnceTheyAreBackToUntouched() {
        InMemoryStore store = new InMemoryStore();
        for (int i = 0; i < 10; i++) {
            assertThat(store.decide(ONE_PER_SECOND, "k" + i, 1, T0).allowed()).isTrue();
        }
        assertThat(store.size()).isEqualTo(10);
        store.cleanUp(T0 + S - 1);
        assertThat(store.size()).isEqualTo(10);
        store.cleanUp(T0 + S);
        assertThat(store.size()).isZero();
        assertThat(store.decide(ONE_PER_SECOND, "k0", 1, T0 + S).allowed()).isTrue();
    }

    @Test
    void storesNothingForRejectionsPeeksOrKeysThatAreUntouchedAgain() {
        InMemoryStore store = new InMemoryStore();
        assertThat(store.decide(ONE_PER_SECOND, "never", 2, T0).never()).isTrue();
        assertThat(store.decide(ONE_PER_SECOND, "peek", 0, T0).allowed()).isTrue();
        assertThat(store.size()).isZero();
        store.decide(ONE_PER_SECOND, "k", 1, T0);
        assertThat(store.size()).isEqualTo(1);
        // a peek after the window finds the key untouched and drops it
        store.decide(ONE_PER_SECOND, "k", 0, T0 + S);
        assertThat(store.size()).isZero();
    }

    @Test
    void whenFullRejectsNewKeysUntilTheFirstStoredKeyExpires() {
        InMemoryStore store = InMemoryStore.builder().maxKeys(2).build();
        Rule rule = Rule.of(Algorithm.GCRA, List.of(Limit.parse("1/10s")));
        store.decide(rule, "a", 1, T0);
        store.decide(rule, "b", 1, T0 + 4 * S);
        Decision full = store.decide(rule, "c", 1, T0 + 5 * S);
        assertThat(full.allowed()).isFalse();
        assertThat(full.retryAfterNanos()).as("until a expires at T0 + 10s").isEqualTo(5 * S);
        assertThat(full.remaining()).isZero();
        // known keys are still decided exactly
        assertThat(store.decide(rule, "a", 1, T0 + 5 * S).allowed()).isFalse();
        assertThat(store.size()).isEqualTo(2);
        // once a has expired, it is swept to make room
        assertThat(store.decide(rule, "c", 1, T0 + 10 * S).allowed()).isTrue();
        assertThat(store.size()).isEqualTo(2);
        assertThat(store.decide(rule, "a", 0, T0 + 10 * S).remaining()).isEqualTo(1);
    }

    @Test
    void whenFullCanAdmitNewKeysWithoutStoringThem() {
        InMemoryStore store = InMemoryStore.builder().maxKeys(1).whenFull(WhenFull.ADMIT).build();
        store.decide(ONE_PER_SECOND, "a", 1, T0);
        for (int i = 0; i < 3; i++) {
            Decision untracked = store.decide(ONE_PER_SECOND, "b", 1, T0);
            assertThat(untracked.allowed()).isTrue();
            assertThat(untracked.remaining()).isZero();
        }
        assertThat(store.size()).isEqualTo(1);
        assertThat(store.decide(ONE_PER_SECOND, "a", 1, T0).allowed()).isFalse();
    }

    @Test
    void sweepsExpiredKeysAsNewOnesArriveSoMemoryStaysBounded() {
        InMemoryStore store = new InMemoryStore();
        Rule rule = Rule.of(Algorithm.SLIDING_WINDOW, List.of(Limit.parse("5/1ms")));
        long t = T0;
        for (int i = 0; i < 200_000; i++) {
            t += 1_000; // 1 µs: a key lives 2 ms, so about 2,000 are alive at any time
            assertThat(store.decide(rule, "key-" + i, 1, t).allowed()).isTrue();
        }
        // the table for ~2,000 live keys has 4,096 slots, four times that while keys come and go; it is swept
        // before it grows past three quarters full
        assertThat(store.size()).isLessThan(3 * 16_384 / 4 + 1);
    }

    /**
     * The table keeps each key's hash beside it and passes other keys by it: keys of one hash ("Aa" and
     * "BB") must still be told apart by their characters, and a key whose hash is zero ("f5a5a608"; zero
     * also marks a hash not written yet) must be found again, before and after the table grows.
     */
    @Test
    void keysOfOneHashAndOfHashZeroAreToldApartAcrossResizes() {
        InMemoryStore store = new InMemoryStore();
        Rule onePerHour = Rule.of(Algorithm.FIXED_WINDOW, List.of(Limit.parse("1/1h")));
        List<String> awkward = List.of("Aa", "BB", "f5a5a608", "\u0000", "Aa\u0100", "BB\u0100");
        assertThat("Aa".hashCode()).isEqualTo("BB".hashCode());
        assertThat("f5a5a608".hashCode()).isZero();
        for (String key : awkward) {
            assertThat(store.decide(onePerHour, key, 1, T0).allowed()).as(key).isTrue();
        }
        for (int i = 0; i < 10_000; i++) { // several resizes
            store.decide(onePerHour, "filler-" + i, 1, T0);
        }
        for (String key : awkward) {
            assertThat(store.decide(onePerHour, key, 1, T0).allowed()).as("%s, still known", key).isFalse();
        }
        assertThat(store.size()).isEqualTo(10_000 + awkward.size());
    }

    @Test
    void resetForgetsAKey() {
        InMemoryStore store = new InMemoryStore();
        store.decide(ONE_PER_SECOND, "k", 1, T0);
        store.reset(ONE_PER_SECOND, "k");
        assertThat(store.size()).isZero();
        assertThat(store.decide(ONE_PER_SECOND, "k", 1, T0).allowed()).isTrue();
        store.reset(ONE_PER_SECOND, "unknown");
    }

    @Test
    void refusesAnEmptyKey() {
        assertThatThrownBy(() -> new InMemoryStore().decide(ONE_PER_SECOND, "", 1, T0))
                .hasMessage("key must not be empty");
        assertThatThrownBy(() -> InMemoryStore.builder().maxKeys(0)).hasMessage("maxKeys must be >= 1, got 0");
    }
}
