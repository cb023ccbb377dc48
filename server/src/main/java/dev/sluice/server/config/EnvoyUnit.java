package dev.sluice.server.config;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The units of Envoy's rate limits, as long as its rate limit service counts them: a week is 7 days, a month 30 and
 * a year 365. One list for every place that meets them: Envoy's configuration files ({@code unit: minute}), a
 * call's limit override and the {@code current_limit} of an answer (the protobuf enums, whose names are these).
 */
public enum EnvoyUnit {
    SECOND(1), MINUTE(60), HOUR(3_600), DAY(86_400), WEEK(7 * 86_400), MONTH(30 * 86_400), YEAR(365 * 86_400);

    private final long seconds;

    EnvoyUnit(long seconds) {
        this.seconds = seconds;
    }

    /** Its length in seconds. */
    public long seconds() {
        return seconds;
    }

    /** Its length in nanoseconds. */
    public long nanos() {
        return seconds * 1_000_000_000L;
    }

    /** The unit of this name in any case ({@code minute}, {@code MINUTE}), or null. */
    public static EnvoyUnit named(String name) {
        for (EnvoyUnit unit : values()) {
            if (unit.name().equalsIgnoreCase(name)) {
                return unit;
            }
        }
        return null;
    }

    /** The unit exactly {@code periodNanos} long, or null: Sluice's periods need not be one. */
    public static EnvoyUnit of(long periodNanos) {
        for (EnvoyUnit unit : values()) {
            if (unit.nanos() == periodNanos) {
                return unit;
            }
        }
        return null;
    }

    /** {@code second, minute, ...}, for a message. */
    public static String names() {
        return Arrays.stream(values()).map(unit -> unit.name().toLowerCase(Locale.ROOT)).collect(Collectors.joining(", "));
    }
}
