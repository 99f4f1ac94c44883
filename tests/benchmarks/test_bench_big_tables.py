"""Big tables (issue 35): XGBoost, IsolationForest, ``LpSVDD()`` and ``DLMSVDD()`` (with and without
labels) at their defaults on the two big tables and a synthetic 1e6 x 10 table, each fit in a
process of its own with the same threads: fit seconds, the ratio to XGBoost's in the same run, test
AUROC, peak memory above the process's start; where an epoch's time goes, with every row in every
epoch (one epoch of the issue's Nystrom m = 1024 run) and at the defaults.

    OMP_NUM_THREADS=2 pytest tests/benchmarks/test_bench_big_tables.py -o addopts="" -s

Needs ../shared/data/big-tables (skipped without it; the synthetic table is made here). A subset:
BIG_TABLES=cover BIG_TABLES_METHODS=XGBoost,LpSVDD(); the references the goal's AUROCs are held
against (every row, Nystrom at m = 1024; the deep one takes minutes an epoch): BIG_TABLES_REFERENCES=1.
Every record goes to $BIG_TABLES_JSON (default: big-tables.json in the working folder).
"""

import json
import os
import time

import pytest

from benchmarks import big_tables

TIMEOUT = 1800.0  # one fit


def _selected(variable: str, default) -> list[str]:
    value = os.environ.get(variable)
    return list(default) if not value else [v.strip() for v in value.split(",") if v.strip()]


@pytest.mark.skipif(not big_tables.DATA_DIR.is_dir(), reason=f"no big tables at {big_tables.DATA_DIR}")
def test_big_tables_at_the_defaults():
    tables = _selected("BIG_TABLES", big_tables.TABLES)
    methods = _selected("BIG_TABLES_METHODS", big_tables.METHODS) + [big_tables.EVERY_ROW]
    if os.environ.get("BIG_TABLES_REFERENCES") == "1":
        methods += list(big_tables.REFERENCES.values())
    start, records = time.perf_counter(), []
    for name in tables:
        for method in methods:
            record = big_tables.run(name, method, TIMEOUT)
            print(json.dumps({k: v for k, v in record.items() if k != "epochs"}), flush=True)
            records.append(record)
    path = os.environ.get("BIG_TABLES_JSON", "big-tables.json")
    with open(path, "w") as handle:
        json.dump({"records": records, "threads": big_tables.THREADS,
                   "wall_seconds": time.perf_counter() - start}, handle, indent=1)
    print(f"\n{big_tables.THREADS} threads, one process per fit; {time.perf_counter() - start:.0f} s")
    print(big_tables.table([r for r in records if r["method"] != big_tables.EVERY_ROW]))
    print("\nwhere an epoch's time goes (mean per epoch):")
    print(big_tables.epoch_table(records))
    print("\n".join(f"{'holds' if ok else 'FAILS'}: {row}" for row, ok in big_tables.goal_rows(records)))
    assert all("error" not in r for r in records), [r for r in records if "error" in r]
