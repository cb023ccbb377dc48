package dev.sluice.server.config;

import java.nio.file.Path;
import java.util.Map;

/** A configuration Sluice refuses, with a message that names the file, the line and the field. */
public final class ConfigException extends Exception {
    private static final long serialVersionUID = 1L;

    /** The files of {@code envoy_configs} read before the refusal (see {@link ServerConfig.Envoy#files()}). */
    private final transient Map<Path, String> read;

    public ConfigException(String message) {
        this(message, Map.of());
    }

    public ConfigException(String message, Map<Path, String> read) {
        super(TerminalText.of(message), null, false, false);
        this.read = Map.copyOf(read);
    }

    /** What the files of {@code envoy_configs} held when the configuration was refused, to see them change. */
    public Map<Path, String> read() {
        return read;
    }
}
