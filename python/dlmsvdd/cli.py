"""The `dlmsvdd` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _size(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NxD such as 6000x2048, got {text!r}") from None
    if n < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"N and D must be positive, got {text!r}")
    return n, d


def _bench(args) -> int:
    from .experiments import kernel_bench

    rows = kernel_bench.run(args.size or [(4000, 512), (6000, 2048), (20000, 64)], rounds=args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


def _gamma(text: str):
    """A number as a float, a strategy name as it is (the configuration checks both)."""
    try:
        return float(text)
    except ValueError:
        return text


# flag -> (config field, type, help); every flag overrides the --config file
TRAIN_FLAGS = {
    "--data": ("data", str, "digits, fashion_mnist, cifar10, cifar100, imagenet_lt or image_folder"),
    "--root": ("root", str, "data root (torchvision layout; ImageNet root for imagenet_lt)"),
    "--split-dir": ("split_dir", str, "folder of ImageNet_LT_{train,test}.txt (default: root)"),
    "--normal-class": ("normal_class", int, "the normal class (index)"),
    "--ratio": ("ratio", float, "labelled anomalies per normal training sample (paper: 0.1, 0.5, 0.75)"),
    "--rho": ("rho", float, "long-tailed pool with imbalance ratio rho (10, 50, 100)"),
    "--backbone": ("backbone", str, "small_cnn, resnet18 or resnet50"),
    "--weights": ("weights", str, "imagenet (local torch cache), a state-dict file, or none"),
    "--image-size": ("image_size", int, "resize images to this size"),
    "--backend": ("backend", str, "exact, nystrom, rff, qmc_rff, orf, sorf, fastfood or rpcholesky"),
    "--n-components": ("n_components", int, "approximation budget m (alias --m, but not under torchrun)"),
    "--p": ("p", float, "slack exponent p > 1 (under torchrun spell it --slack-p)"),
    "--nu": ("nu", float, "margin weight nu >= 1 (under torchrun spell it --margin-nu)"),
    "--gamma": ("gamma", _gamma, "median (once, from the initial features), per-epoch, or a value"),
    "--solver": ("solver", str, "apg, pairwise or paper"),
    "--epochs": ("epochs", int, "alternating epochs"),
    "--recipe": ("recipe", str, "auto, paper (lr 1e-4, best epoch) or scratch (BatchNorm statistics first, lr 1e-3, "
                 "latest epoch); auto: scratch for a built-in backbone without weights"),
    "--pretrain": ("pretrain", str, "step 0 before the first epoch: none, batchnorm or autoencoder"),
    "--pretrain-steps": ("pretrain_steps", int, "autoencoder steps"),
    "--lr": ("lr", float, "Adam learning rate (default: the recipe's)"),
    "--weight-decay": ("weight_decay", float, "Adam weight decay"),
    "--batch-size": ("batch_size", int, "mini-batch size"),
    "--selection": ("selection", str, "validation metric for the best epoch: auroc or balanced_accuracy"),
    "--selection-rule": ("selection_rule", str, "best, or latest (within one validation anomaly of the best)"),
    "--seed": ("seed", int, "seed of every random draw"),
    "--device": ("device", str, "auto, cpu, cuda or cuda:N"),
    "--num-workers": ("num_workers", int, "data-loader worker processes"),
    "--output": ("output", str, "run folder (default: runs/<data>-class<c>-<backend>-seed<s>-<time>)"),
    "--verbose": ("verbose", int, "0 quiet, 1 epoch bar, 2 batch bars too"),
}
# Spellings torchrun's own parser does not mistake for its options (it
# rejects prefixes of several of them, even after the script's name).
FLAG_ALIASES = {"--n-components": ("--m",), "--nu": ("--margin-nu",), "--p": ("--slack-p",)}


def _add_train_flags(parser: argparse.ArgumentParser) -> None:
    for flag, (_, kind, text) in TRAIN_FLAGS.items():
        parser.add_argument(flag, *FLAG_ALIASES.get(flag, ()), type=kind, default=None, help=text)
    parser.add_argument("--frozen", action="store_true", default=None, help="keep the backbone fixed (\"fixed CNN\")")
    parser.add_argument("--fine-labels", action="store_true", default=None, help="CIFAR-100: the 100 fine classes")


def _config(args, base=None):
    from .training.config import TrainConfig

    cfg = TrainConfig.from_yaml(args.config) if getattr(args, "config", None) else (base or TrainConfig())
    overrides = {field: getattr(args, flag[2:].replace("-", "_")) for flag, (field, _, _) in TRAIN_FLAGS.items()}
    overrides.update(frozen=args.frozen, fine_labels=args.fine_labels)
    return TrainConfig.from_dict({**cfg.to_dict(), **{k: v for k, v in overrides.items() if v is not None}})


def _print_result(result: dict, folder: Path) -> None:
    test = result["test"]
    print(f"test AUROC {test['auroc']:.4f}  balanced accuracy {test['balanced_accuracy']:.4f}  "
          f"(best epoch {result['best_epoch']}, {result['seconds']:.1f} s)  ->  {folder}")


def _train(args) -> int:
    from .experiments import runs
    from .training import parallel

    try:
        _, result, folder = runs.train(_config(args))
    finally:
        parallel.leave()  # under torchrun: the process group ends with the command
    if folder is not None:  # rank 0 (or alone) reports
        _print_result(result, folder)
    return 0


def demo_config(args):
    """Digits one-vs-rest with the small CNN from scratch, every training setting at its
    default (the "scratch" recipe); well within 2 minutes on 2 CPU cores."""
    from .training.config import TrainConfig

    return _config(args, TrainConfig(data="digits", backbone="small_cnn", weights=None, ratio=0.1,
                                     output="runs/demo"))


def _demo(args) -> int:
    from dlmsvdd_ext import LpSVDD

    from .data.tasks import pixels
    from .experiments import runs
    from .training import metrics

    cfg = demo_config(args)
    print(f"DLM-SVDD demo: scikit-learn digits, normal class {cfg.normal_class}, anomaly ratio {cfg.ratio}, "
          f"small CNN, {cfg.backend} kernel, {cfg.epochs} epochs")
    _, result, folder = runs.train(cfg)
    _print_result(result, folder)
    if cfg.data != "digits":
        return 0
    task = runs.build_task(cfg)  # the same task, to put raw-pixel LpSVDD beside it
    X_test, t_test = pixels(task.test)
    baseline = LpSVDD(p=cfg.p, nu=cfg.nu, random_state=cfg.seed).fit(*pixels(task.train))
    print(f"for comparison, LpSVDD on raw pixels: test AUROC {metrics.auroc(t_test, baseline.dissimilarity(X_test)):.4f}")
    return 0


def _evaluate(args) -> int:
    from .experiments import runs
    from .training import metrics

    model = runs.load_model(args.run)
    cfg = model.config
    if args.root:
        cfg.root = args.root
    task = runs.build_task(cfg)
    split = getattr(task, args.split)
    f, targets = model.scores(split)
    result = {"split": args.split, **metrics.summary(targets, f, model.threshold_), "n": len(f)}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _score(args) -> int:
    import numpy as np
    import torch

    from .experiments import runs
    from .training import metrics

    model = runs.load_model(args.run)
    if args.npy:
        images = torch.as_tensor(np.load(args.npy), dtype=torch.float32)
        if images.ndim != 4:
            raise SystemExit(f"{args.npy}: expected preprocessed images (N, C, H, W), got shape {tuple(images.shape)}")
        f, targets = model.dissimilarity(images), np.zeros(len(images), dtype=int)
    else:
        cfg = model.config
        if args.root:
            cfg.root = args.root
        f, targets = model.scores(getattr(runs.build_task(cfg), args.split))
    lines = ["index,target,dissimilarity,prediction"] + [
        f"{i},{t},{s:.9g},{p}" for i, (t, s, p) in enumerate(zip(targets, f, metrics.predict(f, model.threshold_)))]
    text = "\n".join(lines) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _preset(args):
    """The sweep the arguments name: a grid file or a preset, with --digits and --set applied."""
    from .experiments import presets
    from .experiments.sweep import Sweep

    overrides = dict(presets.parse_assignment(text) for text in args.set or [])
    if args.preset is not None:
        if getattr(args, "grid", None):
            raise ValueError("give a grid file or --preset, not both")
        return presets.load(args.preset, digits=args.digits, overrides=overrides)
    if not getattr(args, "grid", None):
        raise ValueError("give a grid file or --preset NAME (dlmsvdd presets lists them)")
    if args.digits:
        raise ValueError("--digits applies to presets; use --set with a grid file")
    return presets.Preset.from_sweep(Sweep.from_yaml(args.grid), Path(args.grid).stem).override(overrides)


def _sweep(args) -> int:
    from .experiments.sweep import free_folder

    preset = _preset(args)
    folder = Path(args.output)
    if args.new_folder:
        folder = free_folder(folder, preset.tasks())
        if folder != Path(args.output):
            print(f"{args.output} holds results of other settings: this sweep runs in {folder}")
    records = preset.run(folder, engine=args.engine, workers=args.workers, threads=args.threads,
                         address=args.address, cpus_per_task=args.cpus_per_task,
                         gpus_per_task=args.gpus_per_task, progress=args.verbose > 0)
    status = {s: sum(r["status"] == s for r in records) for s in ("done", "failed", "missing")}
    print(f"sweep {folder}: {status['done']} done, {status['failed']} failed, {status['missing']} missing")
    for r in records:
        if r["status"] == "failed":
            print(f"  failed: {r['task']}: {r['error']}")
    return 0 if status["failed"] == 0 else 1


def _add_preset_flags(parser: argparse.ArgumentParser, *preset_flag: str) -> None:
    if preset_flag:
        parser.add_argument(*preset_flag, metavar="NAME", help="a preset sweep (dlmsvdd presets lists them) or "
                            "a preset YAML file, instead of a grid file")
    parser.add_argument("--digits", action="store_true", help="the preset's small version on the embedded digits")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override, repeatable; the value is YAML: a list sets a grid axis "
                             "(--set normal_class=[0,1]), a single value a base value (--set epochs=5)")


def _presets(args) -> int:
    import yaml

    from .experiments import presets

    if args.preset is None:
        for name in presets.names():
            preset = presets.load(name)
            print(f"{name} ({len(preset.tasks())} tasks; --digits: {len(presets.load(name, digits=True).tasks())})"
                  f"\n    {preset.description}")
        return 0
    preset = _preset(args)
    print(yaml.safe_dump(preset.to_dict(), sort_keys=False, width=100), end="")
    print(f"# {len(preset.tasks())} tasks, e.g. {preset.tasks()[0][0]}")
    return 0


def _report(args) -> int:
    from .experiments.sweep_report import write_report

    keys = [k.strip() for k in args.method.split(",") if k.strip()] if args.method is not None else None
    written = write_report(args.folder, args.output, keys)
    report = next(p for p in written if p.name == "report.md")
    print(report.read_text())
    print("written: " + ", ".join(str(p) for p in written))
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

    d = sub.add_parser("demo", help="train on scikit-learn's digits with a small CNN (about a minute on a CPU)")
    _add_train_flags(d)
    d.set_defaults(func=_demo)

    t = sub.add_parser("train", help="train DLM-SVDD on a one-vs-rest task and write a run folder")
    t.add_argument("--config", metavar="YAML", help="configuration file; flags override it")
    _add_train_flags(t)
    t.set_defaults(func=_train)

    w = sub.add_parser("sweep", help="run a grid of training runs, resumable (finished tasks are skipped)")
    w.add_argument("grid", nargs="?", help="YAML file with 'base' (config values) and 'grid' (field: list of values)")
    _add_preset_flags(w, "--preset")
    w.add_argument("--output", required=True, help="sweep folder; one sub-folder per task")
    w.add_argument("--new-folder", action="store_true",
                   help="if --output holds results of other settings, run into the first free OUTPUT-2, "
                        "OUTPUT-3, ... (default: refuse)")
    w.add_argument("--engine", default="local", help="local (default) or ray")
    w.add_argument("--workers", type=int, default=1,
                   help="local engine: tasks run at once, each in a process of its own (default 1: in this one)")
    w.add_argument("--threads", type=int, help="torch threads per task (default: torch's own; ray: --cpus-per-task)")
    w.add_argument("--address", help="ray: cluster to connect to (auto, host:port, ray://host:port); "
                                     "default: start a local Ray instance")
    w.add_argument("--cpus-per-task", type=float, default=1, help="ray: CPUs each task asks for (default 1)")
    w.add_argument("--gpus-per-task", type=float, default=0, help="ray: GPUs each task asks for (default 0)")
    w.add_argument("--verbose", type=int, default=1, help="0: no progress bar")
    w.set_defaults(func=_sweep)

    p = sub.add_parser("presets", help="list the preset sweeps, or show one resolved (a dry run)")
    p.add_argument("preset", nargs="?", help="a preset name or preset YAML file to show")
    _add_preset_flags(p)
    p.set_defaults(func=_presets)

    r = sub.add_parser("report", help="tables (CSV, Markdown) and plots of a finished sweep folder")
    r.add_argument("folder", help="the sweep folder (one sub-folder per task, each with result.json)")
    r.add_argument("--output", help="write here (default: the sweep folder)")
    r.add_argument("--method", help="config fields that name a method, comma-separated (default: those that vary)")
    r.set_defaults(func=_report)

    for name, text in (("evaluate", "metrics of a trained model on a split of its task"),
                       ("score", "per-sample dissimilarity and prediction as CSV")):
        e = sub.add_parser(name, help=text)
        e.add_argument("run", help="run folder or checkpoint file")
        e.add_argument("--split", choices=("train", "val", "test"), default="test")
        e.add_argument("--root", help="data root, if it moved since training")
        if name == "evaluate":
            e.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
            e.set_defaults(func=_evaluate)
        else:
            e.add_argument("--npy", metavar="FILE", help="score preprocessed images (N, C, H, W) from a .npy file")
            e.add_argument("--output", metavar="CSV", help="write here instead of standard output")
            e.set_defaults(func=_score)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:  # bad input: say what is wrong, no traceback
        print(f"dlmsvdd {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
