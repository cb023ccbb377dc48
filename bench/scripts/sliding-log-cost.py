#!/usr/bin/env python3
"""What one sliding-log decision costs Redis, by the size of the log: INFO commandstats' usec_per_call of EVALSHA.

Usage: sliding-log-cost.py PORT SCRIPT.lua [SCRIPT.lua ...]   (a redis-server of no data on 127.0.0.1:PORT)

For each script (decide.lua, or an older one to compare with) and each size n: a log of n entries is filled
(limit n/1h, one request a millisecond, a time passed in), then 1,000 rejections are timed (the log full), then
1,000 admissions, each after one entry has expired. Calls are pipelined 500 at a time, so that the figure is
Redis's own time, not the round trips.
"""
import socket
import sys


def encode(*words):
    out = b'*%d\r\n' % len(words)
    for word in words:
        word = word if isinstance(word, bytes) else str(word).encode()
        out += b'$%d\r\n%s\r\n' % (len(word), word)
    return out


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port))
        self.file = self.sock.makefile('rb')

    def read(self):
        line = self.file.readline()
        kind, value = line[:1], line[1:-2]
        if kind == b'+':
            return value.decode()
        if kind == b'-':
            raise RuntimeError(value.decode())
        if kind == b':':
            return int(value)
        if kind == b'$':
            size = int(value)
            return None if size < 0 else self.file.read(size + 2)[:-2].decode()
        if kind == b'*':
            return [self.read() for _ in range(int(value))]
        raise RuntimeError('unexpected reply: %r' % line)

    def call(self, *words):
        self.sock.sendall(encode(*words))
        return self.read()

    def pipeline(self, calls):
        for start in range(0, len(calls), 500):
            chunk = calls[start:start + 500]
            self.sock.sendall(b''.join(encode(*c) for c in chunk))
            for _ in chunk:
                self.read()

    def usec_per_evalsha(self, calls):
        self.call('CONFIG', 'RESETSTAT')
        self.pipeline(calls)
        stats = self.call('INFO', 'commandstats')
        line = next(l for l in stats.split('\r\n') if l.startswith('cmdstat_evalsha'))
        return float(line.split('usec_per_call=')[1].split(',')[0])


def decision(sha, ms, size):
    # ARGV: now_ms now_ns cost mode max_delay ttl_margin count, then algorithm 2 (sliding log), amount, period_ms, burst
    return ('EVALSHA', sha, 1, 'sliding-log-cost', ms, 0, 1, 0, 0, 1000, 1, 2, size, 3_600_000, 0)


def main():
    redis = Redis(int(sys.argv[1]))
    base = 1_700_000_000_000
    for path in sys.argv[2:]:
        with open(path) as script:
            sha = redis.call('SCRIPT', 'LOAD', script.read())
        for size in (300, 1_000, 10_000):
            redis.call('DEL', 'sliding-log-cost')
            redis.pipeline([decision(sha, base + i, size) for i in range(size)])
            rejections = redis.usec_per_evalsha([decision(sha, base + size + i, size) for i in range(1_000)])
            admissions = redis.usec_per_evalsha([decision(sha, base + 3_600_000 + i, size) for i in range(1_000)])
            print('%s  %6d entries  rejection %9.2f us  admission %9.2f us' % (path, size, rejections, admissions))


if __name__ == '__main__':
    main()
