package dev.sluice.redis;

import dev.sluice.Decision;
import dev.sluice.algorithm.Rule;

/**
 * What the scripts answer, read back into decisions. {@code gcra.lua} answers binary, {@value #BINARY_ANSWER}
 * bytes a decision (the allowed byte, then four little-endian doubles packed by {@code struct.pack}), because Lua
 * makes numbers text through {@code sprintf}, which cost Redis a fifth of a call; {@code decide.lua} answers seven
 * whole numbers as text. Both arrive one char per byte, on the store's own connections as through
 * {@link ReplyCodec}. An answer that is neither is refused with a message saying what was expected: the store
 * decides it by its failure policy.
 */
final class ScriptReplies {
    /** The length of one decision answered by {@code gcra.lua}: the byte allowed, then four doubles. */
    static final int BINARY_ANSWER = 33;

    private ScriptReplies() {
    }

    /**
     * The decision a script answered: {@code gcra.lua}'s {@value #BINARY_ANSWER} bytes (its first, allowed, is
     * the byte 0 or 1), or {@code decide.lua}'s seven whole numbers separated by single spaces (its first is the
     * digit 0 or 1). The scripts say why each answers as it does.
     */
    static Decision decision(Rule rule, String reply) {
        if (reply == null) {
            throw new IllegalStateException("expected a decision, got nil");
        }
        if (!reply.isEmpty() && reply.charAt(0) <= 1) {
            return binaryDecision(rule, reply);
        }
        long[] fields = new long[7];
        int at = 0;
        for (int i = 0; i < fields.length; i++) {
            int end = i == fields.length - 1 ? reply.length() : reply.indexOf(' ', at);
            if (end < 0) {
                throw new IllegalStateException("expected seven numbers");
            }
            fields[i] = Long.parseLong(reply, at, end, 10);
            at = end + 1;
        }
        return new Decision(fields[0] == 1, fields[1], fields[2], fields[3], fields[4],
                rule.limits().get((int) fields[5]), fields[6]);
    }

    private static Decision binaryDecision(Rule rule, String reply) {
        if (reply.length() != BINARY_ANSWER) {
            throw new IllegalStateException("expected " + BINARY_ANSWER + " bytes, got " + reply.length());
        }
        return new Decision(reply.charAt(0) == 1, wholeNumber(reply, 1), wholeNumber(reply, 9),
                wholeNumber(reply, 17), wholeNumber(reply, 25), rule.limits().get(0));
    }

    /** The little-endian double at {@code at} of a reply read one char per byte, as the whole number it holds. */
    private static long wholeNumber(String reply, int at) {
        long bits = 0;
        for (int i = 7; i >= 0; i--) {
            bits = bits << 8 | (reply.charAt(at + i) & 0xFF);
        }
        double value = Double.longBitsToDouble(bits);
        long whole = (long) value;
        if (whole != value) {
            throw new IllegalStateException("expected whole numbers, got " + value);
        }
        return whole;
    }

    /** The answers of one call of {@code gcra.lua}, one a decision, in the order of its keys. */
    static String[] gcraAnswers(String reply) {
        if (reply.length() % BINARY_ANSWER != 0) {
            throw new IllegalStateException("gcra.lua answered " + reply.length() + " bytes, not a multiple of "
                    + BINARY_ANSWER);
        }
        String[] answers = new String[reply.length() / BINARY_ANSWER];
        for (int i = 0; i < answers.length; i++) {
            answers[i] = reply.substring(i * BINARY_ANSWER, (i + 1) * BINARY_ANSWER);
        }
        return answers;
    }

    /** {@code answer} with each char outside printable ASCII as {@code \xNN}, for a message. */
    static String printable(String answer) {
        StringBuilder shown = new StringBuilder(answer.length());
        for (int i = 0; i < answer.length(); i++) {
            char c = answer.charAt(i);
            if (c >= ' ' && c < 127) {
                shown.append(c);
            } else {
                shown.append(String.format("\\x%02x", (int) c));
            }
        }
        return shown.toString();
    }
}
