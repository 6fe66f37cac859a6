#!/usr/bin/env python3
"""Where a build's time went, from Ninja's log of its last run (BUILD/.ninja_log).

Usage: bench/ninja_top.py BUILD_DIR [N]

Prints the number of compile and other steps, the seconds each kind took summed over steps (CPU-ish:
steps run in parallel), and the N (default 10) most expensive translation units. A log with entries
from several runs counts only the latest entry of each output. Exit 2 on a missing or malformed log,
naming the file and line.
"""
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path = sys.argv[1].rstrip("/") + "/.ninja_log"
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 10
    steps = {}
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.startswith("#"):
                    continue
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 5 or not fields[0].isdigit() or not fields[1].isdigit():
                    print(f"{path}:{number}: not a ninja log entry", file=sys.stderr)
                    return 2
                steps[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    except OSError as e:
        print(f"{path}: {e.strerror}", file=sys.stderr)
        return 2
    compiles = {k: v for k, v in steps.items() if k.endswith(".o")}
    others = {k: v for k, v in steps.items() if not k.endswith(".o")}
    print(f"compile steps: {len(compiles)}, {sum(compiles.values()):.0f} s summed")
    print(f"other steps (links, code generation, test discovery): {len(others)}, {sum(others.values()):.0f} s summed")
    print(f"most expensive translation units:")
    for name, secs in sorted(compiles.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {secs:6.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
