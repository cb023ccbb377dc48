# Sourced by bench/run-redis, bench/run-http and bench/run-grpc: the arithmetic of their figures.

# the middle value of its arguments (the lower middle for an even count)
median() { printf "%s\n" "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# a / b, two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "n/a"; else printf "%.2f", a / b}'; }
# a - b, two decimals
minus() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a - b}'; }
