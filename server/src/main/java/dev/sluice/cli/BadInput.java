package dev.sluice.cli;

/**
 * Input the command refuses, with a message that already names where it came from
 * ({@code trace.csv:14: ...}, {@code --limit: ...}). Printed as one {@code error:} line; exit status 2.
 */
final class BadInput extends Exception {
    private static final long serialVersionUID = 1L;

    BadInput(String message) {
        super(message, null, false, false);
    }
}
