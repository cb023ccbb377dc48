package dev.sluice.server.config;

/** A configuration Sluice refuses, with a message that names the file, the line and the field. */
public final class ConfigException extends Exception {
    private static final long serialVersionUID = 1L;

    public ConfigException(String message) {
        super(message, null, false, false);
    }
}
