package dev.sluice.server.config;

import dev.sluice.server.request.StrictUtf8;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * A text input of Sluice's (a configuration, an Envoy configuration file) read whole, or refused with a message that
 * says why: not there, not a file ({@code /dev/zero} would never end), too large to be a configuration, or not
 * UTF-8, with the line. A lenient read would turn the last into U+FFFD, and two different keys or names into one.
 */
public final class TextFile {
    /** The largest configuration file read: far beyond any real one, far below what would exhaust the heap. */
    public static final int MAX_BYTES = 16 << 20;

    private TextFile() {
    }

    /** The text of {@code path}, decoded as UTF-8. */
    public static String read(Path path) throws ConfigException {
        if (path.toString().isEmpty()) { // else read as the working directory: ": not a regular file (a directory)"
            throw new ConfigException("the path is empty: name a file");
        }
        if (!Files.exists(path)) {
            throw new ConfigException(path + ": no such file");
        }
        if (!Files.isRegularFile(path)) {
            throw new ConfigException(path + ": not a regular file" + (Files.isDirectory(path) ? " (a directory)" : ""));
        }
        byte[] bytes;
        try (InputStream in = Files.newInputStream(path)) {
            bytes = in.readNBytes(MAX_BYTES + 1);
        } catch (NoSuchFileException e) {
            throw new ConfigException(path + ": no such file");
        } catch (IOException e) {
            throw new ConfigException(path + ": cannot read: " + reason(e));
        }
        if (bytes.length > MAX_BYTES) {
            throw new ConfigException(path + ": larger than " + (MAX_BYTES >> 20) + " MiB, too large for a configuration");
        }
        return decoded(path.toString(), bytes);
    }

    /** {@code bytes} as UTF-8, or the line of the first byte that is not. */
    static String decoded(String name, byte[] bytes) throws ConfigException {
        int bad = StrictUtf8.firstBadByte(bytes);
        if (bad >= 0) {
            int line = 1;
            for (int i = 0; i < bad; i++) {
                if (bytes[i] == '\n') {
                    line++;
                }
            }
            throw new ConfigException(name + ":" + line + ": not valid UTF-8 (byte " + (bad + 1) + ")");
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** An I/O failure's reason, never empty: {@code AccessDeniedException} carries only the path, say. */
    public static String reason(IOException e) {
        String name = e.getClass().getSimpleName().replaceAll("Exception$", "").replaceAll("([a-z])([A-Z])", "$1 $2")
                .toLowerCase(java.util.Locale.ROOT);
        if (e instanceof java.nio.file.FileSystemException fs) {
            return fs.getReason() != null ? fs.getReason() : name;
        }
        return e.getMessage() != null ? e.getMessage() : name;
    }
}
