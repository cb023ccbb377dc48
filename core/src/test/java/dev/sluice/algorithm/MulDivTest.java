package dev.sluice.algorithm;

import org.junit.jupiter.api.Test;

import java.math.BigInteger;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class MulDivTest {
    private static final long[] EDGES = {0, 1, 2, 3, 7, 1_000_000_007L, 86_400_000_000_000L, 1L << 40, (1L << 62) + 1,
            Long.MAX_VALUE / 3, Long.MAX_VALUE - 1, Long.MAX_VALUE};

    @Test
    void agreesWithBigIntegerOnEdgesAndRandomOperands() {
        Random random = new Random(7);
        for (int i = 0; i < 200_000; i++) {
            long a = pick(random);
            long b = pick(random);
            long c = pick(random);
            long d = Math.max(1, pick(random));
            BigInteger product = big(a).multiply(big(b));
            BigInteger floor = product.add(big(c)).divide(big(d));
            if (floor.bitLength() < 63) {
                assertThat(MulDiv.floor(a, b, c, d)).as("floor((%d·%d + %d) / %d)", a, b, c, d).isEqualTo(floor.longValue());
            }
            BigInteger ceil = product.add(big(d - 1)).divide(big(d));
            if (ceil.bitLength() < 63) {
                assertThat(MulDiv.ceil(a, b, d)).as("ceil(%d·%d / %d)", a, b, d).isEqualTo(ceil.longValue());
            }
            assertThat(MulDiv.mod(a, b, d)).isEqualTo(product.mod(big(d)).longValue());
            assertThat(MulDiv.compareProducts(a, b, c, d)).as("%d·%d vs %d·%d", a, b, c, d)
                    .isEqualTo(product.compareTo(big(c).multiply(big(d))));
        }
    }

    private static long pick(Random random) {
        return switch (random.nextInt(4)) {
            case 0 -> EDGES[random.nextInt(EDGES.length)];
            case 1 -> random.nextInt(1000);
            case 2 -> random.nextLong() >>> (1 + random.nextInt(62));
            default -> random.nextLong() & Long.MAX_VALUE;
        };
    }

    private static BigInteger big(long value) {
        return BigInteger.valueOf(value);
    }
}
