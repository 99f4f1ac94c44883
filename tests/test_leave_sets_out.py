"""Issue 49's leave-sets-out choice (tests/benchmarks/adbench_leave_sets_out.py) on constructed
records: each left-out set gets the candidate that is best on the other sets' validation rows only,
never on its own or on any test row; the cache resumes and merges shards; ranks share ties."""

import json

import numpy as np
import pytest

from benchmarks import adbench_leave_sets_out as lso


def record(part, name, method, auroc, seed=0, la=0.0, family="tabular"):
    return {"la": la, "part": part, "set": name, "seed": seed, "method": method, "family": family,
            "auroc": auroc}


def plain_choice(records, candidates, left_out):
    """The reference: mean validation AUROC of each candidate over every other set, by a plain loop."""
    best, best_mean = None, -1.0
    for c in candidates:
        values = [r["auroc"] for r in records
                  if r["part"] == "validation" and r["method"] == c and r["set"] != left_out]
        mean = sum(values) / len(values)
        if mean > best_mean:
            best, best_mean = c, mean
    return best


@pytest.fixture
def cache(tmp_path):
    return lso.Cache(tmp_path / "cache.jsonl")


def test_each_left_out_set_gets_the_best_candidate_of_the_other_sets(cache):
    rng = np.random.default_rng(0)
    candidates, sets = ["a", "b", "c"], [f"set{i}" for i in range(6)]
    for name in sets:
        for seed in range(3):
            for c in candidates:
                low = 0.0 if c == "c" else 0.5  # c trails on every set's validation rows ...
                cache.add(record("validation", name, c, float(rng.uniform(low, low + 0.5)), seed))
                cache.add(record("test", name, c, float(rng.uniform()), seed))
    # ... but wins set0's by far: chosen for every set but that one
    for seed in range(3):
        cache.add(record("validation", "set0", "c", 50.0, seed))
    out = lso.leave_sets_out(cache, candidates, "tabular", (0.0,))
    records = list(cache.records.values())
    for name in sets:
        assert out["chosen"][name] == plain_choice(records, candidates, name)
    assert out["chosen"]["set0"] != "c" and all(out["chosen"][s] == "c" for s in sets[1:])
    # the estimate takes the chosen candidate's test records of the left-out set, each seed once
    for name in sets:
        mine = [r for r in out["test"] if r["set"] == name]
        expected = sorted(r["auroc"] for r in records
                          if r["part"] == "test" and r["set"] == name and r["method"] == out["chosen"][name])
        assert sorted(r["auroc"] for r in mine) == expected and len(mine) == 3


def test_choice_reads_only_its_family_and_fractions(cache):
    for name, family in (("t1", "tabular"), ("t2", "tabular"), ("e1", "image embeddings")):
        cache.add(record("validation", name, "a", 0.6, family=family))
        cache.add(record("validation", name, "b", 0.5, family=family))
        cache.add(record("test", name, "a", 0.7, family=family))
        cache.add(record("test", name, "b", 0.9, family=family))
    cache.add(record("validation", "e1", "b", 1.0, family="image embeddings", la=0.05))  # another protocol
    cache.add(record("validation", "e2", "b", 1.0, family="image embeddings"))  # another family's set
    out = lso.leave_sets_out(cache, ["a", "b"], "tabular", (0.0,))
    assert out["chosen"] == {"t1": "a", "t2": "a"}
    assert [r["auroc"] for r in out["test"]] == [0.7, 0.7]


def test_cache_resumes_and_reads_other_shards(tmp_path):
    first = lso.Cache(tmp_path / "shard0.jsonl")
    first.add(record("test", "s", "m", 0.8))
    other = lso.Cache(tmp_path / "shard1.jsonl")
    other.add(record("test", "t", "m", 0.6, seed=1))
    merged = lso.Cache(tmp_path / "shard0.jsonl", also=[tmp_path / "shard1.jsonl"])
    assert merged.has(0.0, "test", "s", 0, "m") and merged.has(0.0, "test", "t", 1, "m")
    assert not merged.has(0.05, "test", "s", 0, "m")
    lines = (tmp_path / "shard0.jsonl").read_text().splitlines()
    assert [json.loads(line)["set"] for line in lines] == ["s"]  # reading a shard never writes it


def test_ranks_share_ties_and_skip_incomplete_tasks():
    records = [record("test", "s", "a", 0.9), record("test", "s", "b", 0.9), record("test", "s", "c", 0.5),
               record("test", "t", "a", 0.5), record("test", "t", "b", 0.7)]  # t lacks c: not ranked
    assert lso.ranks(records) == pytest.approx({"a": 1.5, "b": 1.5, "c": 3.0})
