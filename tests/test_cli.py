"""The dlmsvdd command."""

import json

import pytest

from dlmsvdd.cli import main


def test_bench_prints_and_writes_timings(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--size", "300x16", "--size", "200x33", "--rounds", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rbf_matvec" in printed and "300" in printed
    rows = json.loads(out.read_text())
    assert [(r["n"], r["d"]) for r in rows] == [(300, 16), (200, 33)]
    assert all(r["ours_xy"] > 0 and r["speedup_xy"] > 0 for r in rows)


def test_bad_size_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--size", "12x"])
    assert "expected NxD" in capsys.readouterr().err
