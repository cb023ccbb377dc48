package dev.sluice.server;

/**
 * Text from clients made safe for a log line: a path is decoded ({@code %0A} is a line break, {@code %1B} starts a
 * terminal's escape), and one written as it is would let a client add lines of its own making to the log, or rewrite
 * what a terminal shows of it.
 */
public final class LogText {
    private LogText() {
    }

    /**
     * {@code text} with its control characters (C0, DEL, C1, and the line and paragraph separators) written
     * <code>&#92;uXXXX</code>; tabs kept if {@code keepTabs} (a stack trace's).
     */
    public static String printable(String text, boolean keepTabs) {
        StringBuilder out = null;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if ((c < 0x20 && !(keepTabs && c == '\t')) || c == 0x7f || c >= 0x80 && c < 0xa0 || c == '\u2028'
                    || c == '\u2029') {
                if (out == null) {
                    out = new StringBuilder(text.length() + 8).append(text, 0, i);
                }
                out.append(String.format("\\u%04x", (int) c));
            } else if (out != null) {
                out.append(c);
            }
        }
        return out == null ? text : out.toString();
    }
}
