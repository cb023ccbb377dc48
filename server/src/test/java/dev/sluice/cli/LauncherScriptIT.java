package dev.sluice.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** What {@code bin/sluice} does before the jar runs: where it finds itself, which java it takes, what it runs. */
class LauncherScriptIT {
    private static final Path ROOT = Path.of(System.getProperty("user.dir")).getParent();
    private static final Path SCRIPT = ROOT.resolve("bin/sluice");

    @TempDir
    Path dir;

    private record Run(int exit, String output) {
    }

    private static Run run(List<String> command, Map<String, String> environment) throws Exception {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().putAll(environment);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return new Run(process.exitValue(), output);
    }

    /** A past bug: through a link (on the PATH, the usual way) it looked for ./mvnw beside the link, and failed. */
    @Test
    void runsThroughALinkFromAnotherFolder() throws Exception {
        Path link = Files.createSymbolicLink(Files.createDirectories(dir.resolve("bin")).resolve("sluice"), SCRIPT);
        Path linkToLink = Files.createSymbolicLink(dir.resolve("sl"), Path.of("bin/sluice")); // a relative one too
        assertThat(run(List.of(link.toString(), "--version"), Map.of())).isEqualTo(new Run(0, "sluice 0.1.0\n"));
        assertThat(run(List.of(linkToLink.toString(), "--version"), Map.of())).isEqualTo(new Run(0, "sluice 0.1.0\n"));
    }

    /** A JDK under {@code name} that is its {@code bin/java} script alone, and its release file if one is given. */
    private Path fakeJdk(String name, String javaScript, String release) throws Exception {
        Path java = Files.createDirectories(dir.resolve(name + "/bin")).resolve("java");
        Files.writeString(java, "#!/bin/sh\n" + javaScript + "\n");
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"));
        if (release != null) {
            Files.writeString(dir.resolve(name + "/release"), release);
        }
        return java;
    }

    /** The script's answer to {@code --version} with {@code JAVA_HOME} at {@code name} under the test's folder. */
    private Run versionWithJavaHome(String name) throws Exception {
        return run(List.of(SCRIPT.toString(), "--version"), Map.of("JAVA_HOME", dir.resolve(name).toString()));
    }

    @Test
    void saysWhenItsJavaIsMissingOrTooOld() throws Exception {
        Path old = fakeJdk("old-jdk", "echo '    java.specification.version = 11' >&2", null);
        assertThat(versionWithJavaHome("old-jdk")).isEqualTo(new Run(1, "sluice: needs Java 17 or later; " + old
                + " is Java 11 (set JAVA_HOME to a JDK 17 or later)\n"));
        // a JDK's release file says its version without a JVM started: this java would fail if it were run
        Path released = fakeJdk("released-jdk", "exit 3", "IMPLEMENTOR=\"x\"\nJAVA_VERSION=\"11.0.2\"\n");
        assertThat(versionWithJavaHome("released-jdk")).isEqualTo(new Run(1, "sluice: needs Java 17 or later; "
                + released + " is Java 11.0.2 (set JAVA_HOME to a JDK 17 or later)\n"));
        // a java that does not run (a stub of a missing JDK, a bad JDK_JAVA_OPTIONS) says why, where the script ended
        // silently (a review found it)
        Path broken = fakeJdk("broken-jdk", "echo 'Unable to locate a Java Runtime.' >&2\nexit 1", null);
        assertThat(versionWithJavaHome("broken-jdk")).isEqualTo(new Run(1, "sluice: " + broken
                + " does not run; it said:\nUnable to locate a Java Runtime.\n"));
        assertThat(versionWithJavaHome("no-jdk")).isEqualTo(new Run(1, "sluice: JAVA_HOME is " + dir.resolve("no-jdk")
                + ", which has no bin/java; point it at a JDK 17 or later, or unset it\n"));
    }

    /** The JDK running this test, named by JAVA_HOME, is the one the script runs the jar with. */
    @Test
    void runsTheJarWithJavaHomesJavaAndFromACopy() throws Exception {
        Path javaHome = Path.of(ProcessHandle.current().info().command().orElseThrow()).getParent().getParent();
        assertThat(run(List.of(SCRIPT.toString(), "--version"), Map.of("JAVA_HOME", javaHome.toString())))
                .isEqualTo(new Run(0, "sluice 0.1.0\n"));
        Path built = ROOT.resolve("server/target/sluice.jar");
        Path running = ROOT.resolve("server/target/sluice-running.jar");
        assertThat(running).exists();
        assertThat(Files.mismatch(built, running)).as("the copy is the jar built").isEqualTo(-1);
    }
}
