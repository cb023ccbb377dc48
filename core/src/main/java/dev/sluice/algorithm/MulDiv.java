package dev.sluice.algorithm;

import java.math.BigInteger;

/**
 * Exact {@code a·b/d} on non-negative longs whose product may need up to 126 bits.
 *
 * <p>The algorithms compare and divide products such as {@code prev·(P − e)} with {@code P} in nanoseconds
 * (a day is 8.64·10^13 ns) and counts up to 2^40: the product can pass 2^63 even though every result fits
 * in a long. The common case is a product that fits, which costs one {@link Math#multiplyHigh} more than
 * plain arithmetic; only a product that does not fit takes the {@link BigInteger} path.
 */
final class MulDiv {
    private MulDiv() {
    }

    /** {@code floor((a·b + c) / d)} for {@code a, b, c ≥ 0} and {@code d > 0}; the result must fit in a long. */
    static long floor(long a, long b, long c, long d) {
        long product = a * b;
        if (Math.multiplyHigh(a, b) == 0 && product >= 0) {
            long sum = product + c;
            if (sum >= 0) {
                return sum / d;
            }
        }
        return BigInteger.valueOf(a).multiply(BigInteger.valueOf(b)).add(BigInteger.valueOf(c))
                .divide(BigInteger.valueOf(d)).longValueExact();
    }

    /** {@code floor(a·b / d)}. */
    static long floor(long a, long b, long d) {
        return floor(a, b, 0, d);
    }

    /** {@code ceil(a·b / d)}. */
    static long ceil(long a, long b, long d) {
        return floor(a, b, d - 1, d);
    }

    /** {@code (a·b) mod d}. */
    static long mod(long a, long b, long d) {
        long product = a * b;
        if (Math.multiplyHigh(a, b) == 0 && product >= 0) {
            return product % d;
        }
        return BigInteger.valueOf(a).multiply(BigInteger.valueOf(b)).mod(BigInteger.valueOf(d)).longValueExact();
    }

    /** The sign of {@code a·b − c·d}, for non-negative operands, without overflow. */
    static int compareProducts(long a, long b, long c, long d) {
        long high = Math.multiplyHigh(a, b);
        long otherHigh = Math.multiplyHigh(c, d);
        if (high != otherHigh) {
            return Long.compare(high, otherHigh);
        }
        return Long.compareUnsigned(a * b, c * d);
    }
}
