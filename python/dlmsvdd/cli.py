"""The `dlmsvdd` command."""

from __future__ import annotations

import argparse
import json
import sys


def _size(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NxD such as 6000x2048, got {text!r}") from None
    if n < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"N and D must be positive, got {text!r}")
    return n, d


def _bench(args) -> int:
    from . import bench

    rows = bench.run(args.size or [(4000, 512), (6000, 2048), (20000, 64)], rounds=args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlmsvdd", description="Deep Large-Margin lp-SVDD.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="time the compiled RBF kernels against torch on this machine")
    b.add_argument("--size", type=_size, action="append", metavar="NxD",
                   help="problem size, repeatable (default: 4000x512, 6000x2048, 20000x64)")
    b.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size (default 3)")
    b.add_argument("--json", metavar="FILE", help="also write the timings as JSON")
    b.set_defaults(func=_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
