package dev.sluice.server.config;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;

/**
 * How Sluice reads JSON it is given (the API's request bodies, a {@code reject_body}): strictly, a field given twice or
 * anything after the value refused, not guessed at (the last {@code "policy"} of two would otherwise decide, and
 * {@code {...}{...}} be read as its first object).
 */
public final class StrictJson {
    public static final ObjectMapper READER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS).build();

    private StrictJson() {
    }
}
