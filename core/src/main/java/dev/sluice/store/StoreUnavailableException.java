package dev.sluice.store;

/**
 * A store did not answer, and was asked to say so rather than to decide by its failure policy: for tools
 * such as {@code sluice simulate}, where a decision the store did not make would be a wrong answer.
 */
public final class StoreUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public StoreUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
