#!/usr/bin/python3
"""Alternating A/B of extender_bench --latency-only runs (docs/benchmarks.md, section "extender").

usage: ab.py ROUNDS 'LABEL=COMMAND' ['LABEL=COMMAND' ...]

Runs each COMMAND once per round, in turn, so that the machine's load drifts over every variant
alike, and prints one markdown row per variant: the median over the rounds of each figure the
bench prints (p50/p99 of /filter and the stage means per cluster size).
"""
import re
import statistics
import subprocess
import sys

FILTER = re.compile(r'\| /filter over HTTPS, (\d+) nodes.*?\| \d+ \| (\d+) us \| (\d+) us')
STAGES = re.compile(r'\| (\d+) nodes \| (\d+) us \| (\d+) us \| (\d+) us \| (\d+) us \| \d+ us \| (\d+) us')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    variants = [a.split('=', 1) for a in sys.argv[2:]]
    if any(len(v) != 2 for v in variants):
        sys.exit('each variant is LABEL=COMMAND')
    res = {label: {} for label, _ in variants}
    for _ in range(rounds):
        for label, cmd in variants:
            out = subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                m = FILTER.match(line)
                if m:
                    res[label].setdefault(m.group(1) + ' p50', []).append(int(m.group(2)))
                    res[label].setdefault(m.group(1) + ' p99', []).append(int(m.group(3)))
                m = STAGES.match(line)
                if m:
                    for key, i in (('lib', 4), ('patch', 5), ('rest', 6)):
                        res[label].setdefault(m.group(1) + ' ' + key, []).append(int(m.group(i)))
    keys = sorted({k for r in res.values() for k in r})
    print('| variant | ' + ' | '.join(keys) + ' |')
    print('|---' * (len(keys) + 1) + '|')
    for label, _ in variants:
        row = [str(int(statistics.median(res[label][k]))) if res[label].get(k) else '-' for k in keys]
        print('| ' + label + ' | ' + ' | '.join(row) + ' |')


if __name__ == '__main__':
    main()
