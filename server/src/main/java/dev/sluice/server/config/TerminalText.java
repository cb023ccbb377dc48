package dev.sluice.server.config;

/**
 * Text made safe to print on a terminal or in a log line: control characters (C0, DEL, C1) are written
 * {@code \xNN}, invisible format characters (bidi overrides, zero-width ones) and line or paragraph separators
 * as a backslash, u and four hex digits; everything else, letters past ASCII included, stays as it is.
 *
 * <p>Why: messages quote values from files and traces as they are, and a value holding an escape sequence
 * ({@code ESC [2K}, a carriage return) rewrote the operator's terminal, a line break split one error over two lines,
 * and a NUL reached stderr; a trace built from client-controlled keys (simulate's summary prints them) could so
 * hide what it says (a review found it). The log writes its lines so too: a path a client sent is decoded
 * ({@code %0A} is a line break, {@code %1B} starts a terminal's escape), and written as it is would add lines of the
 * client's making to the log (the log had an escaper of its own, which missed format characters past its list).
 */
public final class TerminalText {
    private TerminalText() {
    }

    public static String of(String text) {
        return of(text, false);
    }

    /** {@link #of(String)}, with tabs kept if {@code keepTabs} (a stack trace's). */
    public static String of(String text, boolean keepTabs) {
        if (text == null) {
            return null;
        }
        StringBuilder shown = null;
        for (int i = 0; i < text.length(); ) {
            int c = text.codePointAt(i);
            // and the invisible ones that reorder or break a line: bidi overrides and isolates, tags past the BMP,
            // line and paragraph separators (reviews found them left as they were)
            boolean control = c < 0x20 && !(keepTabs && c == '\t') || c >= 0x7F && c <= 0x9F || Character.getType(c) == Character.FORMAT
                    || c == 0x2028 || c == 0x2029;
            if (control && shown == null) {
                shown = new StringBuilder(text.length() + 8).append(text, 0, i);
            }
            if (shown != null) {
                if (!control) {
                    shown.appendCodePoint(c);
                } else if (c <= 0xFF) {
                    shown.append(String.format("\\x%02x", c));
                } else {
                    shown.append(String.format(c <= 0xFFFF ? "\\u%04x" : "\\U%08x", c));
                }
            }
            i += Character.charCount(c);
        }
        return shown == null ? text : shown.toString();
    }
}
