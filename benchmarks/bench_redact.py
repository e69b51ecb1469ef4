"""Time of ``redact_text`` (``app/redact.py``) on log lines, ordinary and hostile.

Every log line goes through it on the event loop, uvicorn's access line with the caller's raw
query string included, so its time must stay linear in the line's length whatever the line
holds. The hostile lines repeat pieces that look like the start of a URL with a password and
never finish one.

Run: ``.venv/bin/python benchmarks/bench_redact.py [--sizes 2000,8000,32000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.redact import redact_text

PIECES = {
    "ordinary": "GET http://u:secret@rm:8088/ws/v1/cluster/apps?user=a 200 ",
    "://:@": "://:@",
    "a://:x": "a://:x",
    "a://b:": "a://b:",
    "http://u:": "http://u:",
    "a:// ": "a:// ",
}


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s]
    except ValueError:
        raise SystemExit(f"--sizes {text!r}: comma-separated character counts") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--sizes {text!r}: each at least 1")
    return sizes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,8000,32000,128000")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (best is shown)")
    args = parser.parse_args(argv)
    sizes = _sizes(args.sizes)
    print(f"| line | {' | '.join(f'{n:,} chars ms' for n in sizes)} | ms per 10,000 chars |")
    print(f"| --- | {' | '.join('---' for _ in sizes)} | --- |")
    for name, piece in PIECES.items():
        cells = []
        for n in sizes:
            line = "/" + piece * max(1, n // len(piece))
            best = min(_timed(line) for _ in range(max(1, args.repeat)))
            cells.append(best)
        per_10k = cells[-1] * 1000 / (sizes[-1] / 10_000)
        print(f"| {name} | {' | '.join(f'{c * 1000:.1f}' for c in cells)} | {per_10k:.2f} |")


def _timed(line: str) -> float:
    start = time.perf_counter()
    redact_text(line)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
