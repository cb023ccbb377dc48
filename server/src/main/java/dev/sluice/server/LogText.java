package dev.sluice.server;

/**
 * Text from clients made safe for a log line: a path is decoded ({@code %0A} is a line break, {@code %1B} starts a
 * terminal's escape), and one written as it is would let a client add lines of its own making to the log, or rewrite
 * what a terminal shows of it.
 */
public final class LogText {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private LogText() {
    }

    /**
     * The line and paragraph separators, and the characters that change how a terminal orders or shows what follows
     * (zero widths, bidirectional marks, embeddings, overrides and isolates, the byte order mark): a path could hide
     * or reverse part of its line.
     */
    private static boolean reorders(char c) {
        return c >= '\u200b' && c <= '\u200f' || c >= '\u2028' && c <= '\u202e' || c >= '\u2060' && c <= '\u206f'
                || c == '\ufeff';
    }

    /**
     * {@code text} with its control characters (C0, DEL, C1, the line and paragraph separators, those that reorder
     * or hide text) written <code>&#92;uXXXX</code>; tabs kept if {@code keepTabs} (a stack trace's).
     */
    public static String printable(String text, boolean keepTabs) {
        StringBuilder out = null;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < 0x20 && !(keepTabs && c == '\t') || c == 0x7f || c >= 0x80 && c < 0xa0 || reorders(c)) {
                if (out == null) {
                    out = new StringBuilder(text.length() + 8).append(text, 0, i);
                }
                out.append('\\').append('u').append(HEX[c >> 12]).append(HEX[c >> 8 & 0xf]).append(HEX[c >> 4 & 0xf])
                        .append(HEX[c & 0xf]);
            } else if (out != null) {
                out.append(c);
            }
        }
        return out == null ? text : out.toString();
    }
}
