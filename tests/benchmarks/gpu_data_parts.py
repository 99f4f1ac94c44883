"""The fetch script's image arrays carried to a machine in parts, and made whole there.

A call to the GPU machine carries at most 64 MiB with the checkout, and CIFAR-10's arrays are 185 MB
(xz with a delta filter: 116 MiB), so they travel in parts, one per call, each call leaving its part on
the machine for the next. ``pack`` writes an ``.npz``'s arrays as one xz stream cut into parts of at
most ``--part-mib`` MiB, with a manifest (the arrays' names, shapes, dtypes and the SHA-256 of their
bytes); ``unpack`` joins the parts found in the folders it is given, checks them against the manifest
and writes the ``.npz`` that ``paper_protocol.py --root`` reads.

    python tests/benchmarks/gpu_data_parts.py pack ~/.cache/dlmsvdd-images/cifar10.npz gpu-parts
    python3 tests/benchmarks/gpu_data_parts.py unpack /root/data cifar10 gpu-parts /root/parts   # on the machine
"""
import argparse
import hashlib
import json
import lzma
import sys
from pathlib import Path

import numpy as np

MIB = 1 << 20


def _filters(arrays: dict) -> list:
    """xz's filters: a delta over the images' channels (neighbouring bytes of one pixel differ little)."""
    channels = max((a.shape[-1] for a in arrays.values() if a.dtype == np.uint8 and a.ndim == 4), default=1)
    return [{"id": lzma.FILTER_DELTA, "dist": channels}, {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


def pack(npz: Path, out: Path, part_mib: float) -> list[Path]:
    """``npz``'s arrays as parts NAME.partNN of at most ``part_mib`` MiB and NAME.json in ``out``."""
    with np.load(npz) as data:
        arrays = {key: np.ascontiguousarray(data[key]) for key in data.files}
    flat = [a.reshape(-1).view(np.uint8) for a in arrays.values()]  # the arrays' bytes, not copied
    digest = hashlib.sha256()
    for chunk in flat:
        digest.update(chunk)
    compressor = lzma.LZMACompressor(format=lzma.FORMAT_XZ, filters=_filters(arrays))
    stream = b"".join([compressor.compress(chunk) for chunk in flat] + [compressor.flush()])
    size = max(1, int(part_mib * MIB))
    name = npz.name.removesuffix(".npz")
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, start in enumerate(range(0, len(stream), size)):
        parts.append(out / f"{name}.part{i:02d}")
        parts[-1].write_bytes(stream[start:start + size])
    manifest = {"arrays": [[key, list(a.shape), a.dtype.str] for key, a in arrays.items()],
                "sha256": digest.hexdigest(), "parts": len(parts)}
    (out / f"{name}.json").write_text(json.dumps(manifest))
    return parts


def unpack(dest: Path, name: str, folders: list[Path]) -> Path:
    """DEST/NAME.npz from the parts and manifest of NAME found in ``folders``; raises ValueError when a
    part is missing or the arrays differ from the manifest's."""
    path = next((f / f"{name}.json" for f in folders if (f / f"{name}.json").is_file()), None)
    if path is None:
        raise ValueError(f"no {name}.json in {', '.join(map(str, folders))}: pack wrote it beside the parts")
    manifest = json.loads(path.read_text())
    found = {p.name: p for f in folders for p in f.glob(f"{name}.part*")}
    wanted = [f"{name}.part{i:02d}" for i in range(manifest["parts"])]
    missing = [w for w in wanted if w not in found]
    if missing:
        raise ValueError(f"{', '.join(missing)} not found in {', '.join(map(str, folders))}: "
                         "each call carries one part; unpack where all of them are")
    damaged = f"{name}'s parts do not make the arrays that were packed"
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        raw = b"".join(decompressor.decompress(found[w].read_bytes()) for w in wanted)
    except lzma.LZMAError as err:
        raise ValueError(f"{damaged} ({err}): carry them again") from None
    if not decompressor.eof or hashlib.sha256(raw).hexdigest() != manifest["sha256"]:
        raise ValueError(f"{damaged} (the stream ends early or its SHA-256 differs): carry them again")
    arrays, at = {}, 0
    for key, shape, dtype in manifest["arrays"]:
        count = int(np.prod(shape))
        arrays[key] = np.frombuffer(raw, dtype=dtype, count=count, offset=at).reshape(shape)
        at += count * np.dtype(dtype).itemsize
    dest.mkdir(parents=True, exist_ok=True)
    np.savez(dest / f"{name}.npz", **arrays)
    return dest / f"{name}.npz"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("pack", help="an .npz into parts")
    p.add_argument("npz", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--part-mib", type=float, default=59.0,
                   help="a part's most MiB (default 59: one call's room beside the checkout)")
    u = verbs.add_parser("unpack", help="parts into DEST/NAME.npz")
    u.add_argument("dest", type=Path)
    u.add_argument("name", help="the .npz's name without .npz (cifar10, fashion_mnist)")
    u.add_argument("folders", type=Path, nargs="+", help="the folders holding its parts and manifest")
    args = parser.parse_args(argv)
    try:
        if args.verb == "pack":
            for part in pack(args.npz, args.out, args.part_mib):
                print(f"{part} {part.stat().st_size / MIB:.1f} MiB")
        else:
            print(unpack(args.dest, args.name, args.folders))
    except (ValueError, OSError) as err:
        print(f"gpu_data_parts: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
