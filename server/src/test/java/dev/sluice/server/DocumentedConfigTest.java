package dev.sluice.server;

import dev.sluice.server.config.ConfigLoader;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every {@code sluice.yaml} the docs show loads as shown: a reader copies them. Found by walking through the docs
 * as a new user: the reference configuration of docs/server.md set {@code burst}, {@code refill} and
 * {@code max_delay} on a sliding-window policy that rejects, and {@code sluice check} refused it three times over.
 * A block is one of Sluice's files when a line of it begins {@code policies:}.
 */
class DocumentedConfigTest {
    @ParameterizedTest
    @ValueSource(strings = {"docs/server.md", "docs/envoy.md"})
    void everyConfigurationTheDocsShowLoads(String doc) throws Exception {
        List<String> lines = Files.readAllLines(Path.of("..").resolve(doc));
        List<Integer> checked = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).equals("```yaml")) {
                continue;
            }
            int first = i + 1;
            StringBuilder block = new StringBuilder();
            for (i = first; !lines.get(i).equals("```"); i++) {
                block.append(lines.get(i)).append('\n');
            }
            if (block.toString().lines().anyMatch(line -> line.startsWith("policies:"))) {
                ConfigLoader.parse(doc + " (the block at line " + (first + 1) + ")", block.toString()); // throws, naming the line, if refused
                checked.add(first + 1);
            }
        }
        assertThat(checked).as("configurations found in %s", doc).isNotEmpty();
    }

    /** The stored key docs/server.md shows is the one examples/sluice.yaml's api-per-key stores, checksum and all. */
    @org.junit.jupiter.api.Test
    void theStoredKeyTheDocsShowIsTheExamplesOwn() throws Exception {
        java.util.regex.Matcher shown = java.util.regex.Pattern.compile("api-per-key@[0-9a-f]{8}:user-42")
                .matcher(Files.readString(Path.of("..").resolve("docs/server.md")));
        assertThat(shown.find()).isTrue();
        var config = ConfigLoader.load(Path.of("..").resolve("examples/sluice.yaml"));
        assertThat(Policies.storedKey(config.policy("api-per-key"), "user-42")).isEqualTo(shown.group());
    }
}
