"""The `tokokita-etl cron` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from tokokita_etl.cron.explain import explain, format_report
from tokokita_etl.cron.parse import CronError


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 1000, got '{text}'")
    return value


def main(
    argv: list[str] | None = None,
    *,
    default_tz: str,
    now: Callable[[], datetime] | None = None,
) -> int:
    """Command line: print the report for EXPR; 0 when valid, 2 when not."""
    parser = argparse.ArgumentParser(
        prog="cron", description="Validate, explain and preview a five-field cron expression."
    )
    parser.add_argument("expr", nargs="+", metavar="EXPR", help="cron expression, quoted")
    parser.add_argument("--after", help="ISO 8601 start (default: now); naive means in --tz")
    parser.add_argument("--count", type=_count, default=6, help="how many runs (default 6)")
    parser.add_argument("--tz", default=default_tz, help=f"IANA time zone (default {default_tz})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return exc.code if isinstance(exc.code, int) else 2
    if args.after is None:
        after = (now or (lambda: datetime.now(UTC)))()
    else:
        try:
            after = datetime.fromisoformat(args.after)
        except ValueError:
            print(f"error: --after '{args.after}' is not an ISO 8601 date-time", file=sys.stderr)
            return 2
    try:
        report = explain(" ".join(args.expr), after=after, count=args.count, tz=args.tz)
    except CronError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_report(report, args.tz))
    return 0


