package dev.sluice.algorithm;

import dev.sluice.Decision;

/**
 * What {@link Rule#decide} makes of a request: the decision, and the state the store keeps after it.
 *
 * @param decision the answer
 * @param next     the state to store: the very state given when nothing changed (a rejection, a peek),
 *                 {@code null} when the key is untouched and can be dropped
 */
public record Outcome(Decision decision, KeyState next) {
}
