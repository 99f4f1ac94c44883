"""tests/benchmarks/gpu_data_parts.py: an .npz carried in parts is the same arrays again, and a part
missing or damaged is named, not loaded."""
import numpy as np
import pytest

from benchmarks import gpu_data_parts


@pytest.fixture
def images(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"X_train": rng.integers(0, 256, (40, 8, 8, 3), dtype=np.uint8),
              "y_train": rng.integers(0, 10, 40).astype(np.int64),
              "X_test": rng.integers(0, 256, (10, 8, 8, 3), dtype=np.uint8),
              "y_test": rng.integers(0, 10, 10).astype(np.int64)}
    np.savez_compressed(tmp_path / "cifar10.npz", **arrays)
    return tmp_path / "cifar10.npz", arrays


def test_parts_in_two_folders_make_the_arrays_again(images, tmp_path):
    npz, arrays = images
    parts = gpu_data_parts.pack(npz, tmp_path / "a", part_mib=3000 / gpu_data_parts.MIB)
    assert len(parts) > 2 and all(p.stat().st_size <= 3000 for p in parts)
    (tmp_path / "b").mkdir()
    for part in parts[1::2]:  # as two calls leave them: some parts in one folder, the rest in another
        part.rename(tmp_path / "b" / part.name)
    out = gpu_data_parts.unpack(tmp_path / "data", "cifar10", [tmp_path / "a", tmp_path / "b"])
    with np.load(out) as made:
        assert made.files == list(arrays)
        for key, array in arrays.items():
            assert made[key].dtype == array.dtype
            np.testing.assert_array_equal(made[key], array)


def test_a_missing_or_damaged_part_is_named(images, tmp_path, capsys):
    npz, _ = images
    parts = gpu_data_parts.pack(npz, tmp_path / "a", part_mib=3000 / gpu_data_parts.MIB)
    kept = parts[1].read_bytes()
    parts[1].unlink()
    assert gpu_data_parts.main(["unpack", str(tmp_path / "data"), "cifar10", str(tmp_path / "a")]) == 2
    assert "cifar10.part01 not found" in capsys.readouterr().err
    damaged = bytearray(kept)
    damaged[-1] ^= 1
    parts[1].write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="parts do not make the arrays that were packed"):
        gpu_data_parts.unpack(tmp_path / "data", "cifar10", [tmp_path / "a"])
    assert not (tmp_path / "data" / "cifar10.npz").exists()
