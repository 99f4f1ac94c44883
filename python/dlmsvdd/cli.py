"""The `dlmsvdd` command.

Mistakes (a bad value, a missing file, a device this machine lacks, a missing
optional package) end with `dlmsvdd <command>: error: ...` and exit code 2,
without a traceback unless `--verbose 2`; Ctrl-C ends with exit code 130.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import sys
from pathlib import Path


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, except where there is none (None, a flag off)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _size(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NxD such as 6000x2048, got {text!r}") from None
    if n < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"N and D must be positive, got {text!r}")
    return n, d


def _output_file(path: str | None, flag: str) -> Path | None:
    """A file the command will write: refused now, before any work, when it
    cannot be (a folder, a missing folder)."""
    if path is None:
        return None
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} {path!r} is a folder; give a file name")
    if not out.parent.is_dir():
        raise ValueError(f"{flag} {path!r}: the folder {str(out.parent)!r} does not exist")
    return out


def _write(out: Path, text: str, flag: str) -> None:
    try:
        out.write_text(text)
    except OSError as err:
        raise ValueError(f"cannot write {flag} {str(out)!r}: {err.strerror or err}") from None


def _bench(args) -> int:
    from .experiments import kernel_bench

    out = _output_file(args.json, "--json")
    rows = kernel_bench.run(args.size or [(4000, 512), (6000, 2048), (20000, 64)], rounds=args.rounds)
    if out is not None:
        _write(out, json.dumps(rows, indent=2), "--json")
    return 0


# flag -> help; a flag sets the config field of its name (_field) and overrides the
# --config file. The values are typed as the field (TrainConfig's typed) and checked
# with the whole configuration.
TRAIN_FLAGS = {
    "--data": "digits, fashion_mnist, cifar10, cifar100, imagenet_lt, image_folder, image_arrays (images held "
              "as arrays: --root names the .npz file or the folder of .npy files), or table (feature vectors "
              "from --path)",
    "--root": "data root (torchvision layout, or the fetch script's cifar10.npz / fashion_mnist.npz in it; "
              "ImageNet root for imagenet_lt; for image_arrays the .npz file or folder of X_train, y_train, "
              "X_test, y_test)",
    "--path": "table data: a .npz file (arrays X, y) or a .csv file with a label column; labels 0 normal, "
              "1 anomaly",
    "--label-column": "table data (.csv): the label column's name",
    "--labelled-fraction": "table data: the fraction of the training anomalies given as labelled (ADBench's "
                           "la; the others stay unlabelled among the normal rows); default: all",
    "--categorical": "table data: columns to one-hot encode although they hold numbers, comma-separated "
                     "(text columns are categorical anyway)",
    "--missing": "table data: impute (numeric: the training median; categorical: a category of its own; "
                 "with indicator columns) instead of refusing missing cells",
    "--split-dir": "folder of ImageNet_LT_{train,test}.txt (default: root)",
    "--normal-class": "the normal class (index)",
    "--ratio": "labelled anomalies per normal training sample (paper: 0.1, 0.5, 0.75)",
    "--rho": "long-tailed pool with imbalance ratio rho (10, 50, 100)",
    "--backbone": "small_cnn, mlp, resnet18, resnet50, or auto: without --weights the small_cnn for "
                  "images and the mlp for tables, resnet50 with them",
    "--weights": "imagenet (local torch cache; the paper's), a state-dict file, or none "
                 "(the default)",
    "--image-size": "resize images to this size (the small CNN takes 4 and more)",
    "--cnn-width": "the small CNN's first-block channels (default: the recipe's, 32)",
    "--cnn-branches": "the small CNN's independent branches, their kernel distances averaged; with --cnn-width "
                      "at most ResNet-50's parameters (default: the recipe's, 4 from scratch, 1 for the paper; 1 "
                      "from scratch past the CPU's budget, see --budget-rows)",
    "--mlp-width": "the MLP's hidden width; its features: width // 2 (default: the recipe's, 128)",
    "--mlp-layers": "the MLP's hidden layers (default: the recipe's, 2)",
    "--kernel": "auto (exact up to 10,000 training rows, nystrom with m <= 256 above), exact, nystrom, rff, "
                "qmc_rff, orf, sorf, fastfood or rpcholesky (formerly --backend)",
    "--n-components": "approximation budget m (alias --m, but not under torchrun)",
    "--p": "slack exponent p >= 1.1 (under torchrun spell it --slack-p)",
    "--nu": "margin weight nu >= 1, or auto (the default: with labelled anomalies 5 for a network from scratch "
            "on images, 1.2 otherwise; 1 without; under torchrun spell it --margin-nu)",
    "--slack-scale": "the slack penalties c1, c2 as a multiple of one over the class sizes (1: the paper's), or "
                     "auto (the default: with labelled anomalies 10 for a network from scratch on images, 1 "
                     "otherwise; 1 without)",
    "--self-labelling": "without labelled anomalies: the fraction of training rows, the most anomalous to a "
                        "one-class LpSVDD on the inputs, labelled anomalous before training (0: none)",
    "--epoch-rows": "on tables of more than 10,000 training rows, the rows each epoch trains on (a fresh draw; "
                    "the final boundary on all of them); 0: every row (default: the recipe's, 4096 for the MLP, "
                    "0 for images)",
    "--gamma": "median (1 / the initial features' median squared distance, once), local (10 x that), "
               "per-epoch, or a value",
    "--solver": "apg, pairwise or paper",
    "--contamination": "threshold without validation anomalies: the share of new normal "
                       "samples called anomalous (p-value <= it over the validation normals), or radius "
                       "(the sphere's r^2)",
    "--epochs": "alternating epochs (default: the recipe's, 30; 15 for the MLP from scratch; from scratch on "
                "images on the CPU fewer on huge training sets, see --budget-rows)",
    "--budget-rows": "with --epochs left to the recipe: the training rows the four-branch small CNN's "
                     "omega-steps see in all; past it one branch (6 times the rows), then epochs = min(30, "
                     "ceil(6 x budget / training rows)); 0: no budget (default: the recipe's, 75000 from scratch "
                     "on images on the CPU, 0 otherwise)",
    "--recipe": "auto, paper (lr 1e-4, best epoch) or scratch (BatchNorm statistics first, "
                "lr 1e-3, latest epoch, 4 CNN branches); auto: scratch for a built-in backbone without weights",
    "--pretrain": "step 0 before the first epoch: none, batchnorm, autoencoder or deep_sad (default: the recipe's)",
    "--pretrain-steps": "autoencoder or Deep SAD steps",
    "--lr": "Adam learning rate (default: the recipe's)",
    "--lr-schedule": "the learning rate over the epochs: constant, or cosine (half a cosine from --lr towards 0 "
                     "at the last epoch) (default: the recipe's)",
    "--weight-decay": "Adam weight decay",
    "--batch-size": "mini-batch size",
    "--selection": "validation metric for the best epoch: auroc or balanced_accuracy",
    "--selection-rule": "best, or latest: the latest epoch within one validation anomaly of the "
                        "best (default: the recipe's)",
    "--on-divergence": "non-finite or collapsed training: rollback (to the best epoch, with a "
                       "warning; default) or error",
    "--precision": "the omega-step's arithmetic on a GPU: tf32, float32 or bf16 (autocast); scores, features and "
                   "exports are IEEE float32 whatever it says",
    "--seed": "seed of every random draw",
    "--device": "auto, cpu, cuda or cuda:N",
    "--num-workers": "data-loader worker processes",
    "--output": "run folder (default: runs/<data>-class<c>-<kernel>-seed<s>-<time>)",
    "--verbose": "0 quiet, 1 epoch bar, 2 batch bars too (and tracebacks of errors)",
}
# Spellings torchrun's own parser does not mistake for its options (it
# rejects prefixes of several of them, even after the script's name).
FLAG_ALIASES = {"--n-components": ("--m",), "--nu": ("--margin-nu",), "--p": ("--slack-p",)}
SWITCHES = {"--frozen": "keep the backbone fixed (\"fixed CNN\")",
            "--fine-labels": "CIFAR-100: the 100 fine classes",
            "--tensorboard": "also log each epoch's numbers to RUN/tensorboard (needs the "
                             "tensorboard package)",
            "--channels-last": "train on images in channels-last (NHWC) memory order (tensor-core convolutions)"}
# switches that turn off a field that is on by default: --no-guard sets guard to False
OFF_SWITCHES = {"--no-guard": "without the distance guard: rows far beyond the training data are scored by the "
                              "network's features alone (the paper's model; see dlmsvdd.training.guard)",
                "--no-input-consensus": "feature vectors: score by the deep model alone, without the consensus of "
                                        "detectors on the input (see dlmsvdd.training.input_consensus)",
                "--no-cnn-branch-norm": "with more than one small-CNN branch: their features concatenated as they "
                                         "are and normalised as one vector, not each branch apart",
                "--no-deterministic": "let cuDNN pick its fastest algorithms, some of which add in any order (a seed "
                                      "then gives the same model on a CPU, not on a GPU)"}
RESUMABLE = ("verbose", "device")  # what --resume may change
VERBOSE = (0, 1, 2)  # every command's --verbose levels (train's: TrainConfig.verbose)


def _field(flag: str) -> str:
    """The configuration field a train flag sets: --weight-decay sets weight_decay, --no-guard guard."""
    return flag.removeprefix("--no-").removeprefix("--").replace("-", "_")


class _Renamed(argparse.Action):
    """A flag of an earlier version: refused, with the name that replaced it (``const``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is now {self.const}: write {self.const} {values}")


def _add_train_flags(parser: argparse.ArgumentParser, defaults) -> None:
    """The configuration's flags: absent unless given (so a --config file's values
    stand; "--weights none" is given), typed by the configuration's own rules;
    their help shows the value used when neither gives one (``defaults``, a TrainConfig)."""
    from .training.checkpoints import RENAMED_FIELDS
    from .training.config import typed

    for flag, text in TRAIN_FLAGS.items():
        field = _field(flag)
        default = getattr(defaults, field)
        shown = "" if default is None else f" (default: {default})"
        parser.add_argument(flag, *FLAG_ALIASES.get(flag, ()), dest=field, type=functools.partial(typed, field),
                            default=argparse.SUPPRESS, help=text + shown)
    for flag, text in SWITCHES.items():
        parser.add_argument(flag, dest=_field(flag), action="store_true", default=argparse.SUPPRESS, help=text)
    for flag, text in OFF_SWITCHES.items():
        parser.add_argument(flag, dest=_field(flag), action="store_false", default=argparse.SUPPRESS, help=text)
    for old, new in RENAMED_FIELDS.items():
        parser.add_argument(f"--{old.replace('_', '-')}", action=_Renamed, const=f"--{new.replace('_', '-')}",
                            help=argparse.SUPPRESS)


def _given(args) -> dict:
    """The configuration fields the flags set."""
    fields = [_field(flag) for flag in [*TRAIN_FLAGS, *SWITCHES, *OFF_SWITCHES]]
    return {field: getattr(args, field) for field in fields if hasattr(args, field)}


def _config(args, base=None):
    from .training.config import TrainConfig

    cfg = TrainConfig.from_yaml(args.config) if getattr(args, "config", None) else (base or TrainConfig())
    cfg = TrainConfig.from_dict({**cfg.to_dict(), **_given(args)})
    _refuse_ignored(cfg.data, _given(args))
    return cfg


# flags only one kind of data reads; given with the other, they would be ignored without a word
IMAGE_FLAGS = ("root", "split_dir", "normal_class", "ratio", "rho", "fine_labels", "image_size")
TABLE_FLAGS = ("path", "label_column", "labelled_fraction")


def _refuse_ignored(data: str, given: dict) -> None:
    table = data == "table"
    ignored = [f"--{name.replace('_', '-')}" for name in (IMAGE_FLAGS if table else TABLE_FLAGS) if name in given]
    if not ignored:
        return
    flags, verb = ", ".join(ignored), "applies" if len(ignored) == 1 else "apply"
    if table:
        raise ValueError(f"{flags} {verb} to image data, not to --data table (a table's labelled anomalies: "
                         "--labelled-fraction); drop it")
    raise ValueError(f"{flags} {verb} to --data table, not to --data {data}: drop it, or add --data table")


def _print_result(result: dict, folder: Path) -> None:
    test = result["test"]
    if test["auroc"] is None:  # a test split of one class (a table of normal rows only): no AUROC to give
        scores = "test AUROC n/a (the test split has one class)"
    else:
        scores = f"test AUROC {test['auroc']:.4f}  balanced accuracy {test['balanced_accuracy']:.4f}"
    print(f"{scores}  (best epoch {result['best_epoch']}, {result['seconds']:.1f} s)  ->  {folder}")


def _resume_config(args):
    """The unfinished run's own configuration, with --verbose and --device as given."""
    from .experiments import runs
    from .training import checkpoints
    from .training.config import TrainConfig

    other = sorted(field for field in _given(args) if field not in RESUMABLE) + (["config"] if args.config else [])
    if other:
        raise ValueError(f"--resume continues {args.resume} with its own configuration; drop the other flags "
                         f"({', '.join(other)}); only --verbose and --device may change")
    progress = runs.unfinished(args.resume)
    if progress is None:
        done = (Path(args.resume) / "model.pt").is_file()
        raise ValueError(f"{args.resume} holds no unfinished run (no {runs.CHECKPOINT}"
                         + ("; it finished: model.pt is there)" if done else ")"))
    values = {**checkpoints.upgraded_config(progress["config"]),
              **{k: v for k, v in _given(args).items() if k in RESUMABLE}}
    return TrainConfig.from_dict({**values, "output": args.resume})


def _train(args) -> int:
    from .experiments import runs
    from .training import parallel

    resume = args.resume is not None
    cfg = _resume_config(args) if resume else _config(args)
    if cfg.output is None:  # named now: an interrupted run is told where its checkpoint is
        cfg.output = str(runs.default_output(cfg))
    progress = None if resume else runs.unfinished(cfg.output)
    if progress is not None:
        raise ValueError(f"{cfg.output} holds an unfinished run (epochs 0 to {progress['next_epoch'] - 1} of 0 to "
                         f"{progress['epochs']} saved): continue it with `dlmsvdd train --resume {cfg.output}`, "
                         f"or remove {Path(cfg.output) / runs.CHECKPOINT} to start over")
    try:
        _, result, folder = runs.train(cfg, resume=resume)
    except KeyboardInterrupt:
        progress = runs.unfinished(cfg.output) if Path(cfg.output).is_dir() else None
        saved = ("nothing was saved" if progress is None else
                 f"epochs 0 to {progress['next_epoch'] - 1} are saved in {Path(cfg.output) / runs.CHECKPOINT}; "
                 f"continue with `dlmsvdd train --resume {cfg.output}`")
        print(f"dlmsvdd train: interrupted; {saved}", file=sys.stderr)
        return 130
    finally:
        parallel.leave()  # under torchrun: the process group ends with the command
    if folder is not None:  # rank 0 (or alone) reports
        _print_result(result, folder)
    return 0


def _demo_defaults():
    """Digits one-vs-rest with the small CNN from scratch, every training setting at its
    default (the "scratch" recipe); well within 2 minutes on 2 CPU cores. Normal class 3,
    the documentation's example: on class 0 every detector, raw pixels included, scores 1.0."""
    from .training.config import TrainConfig

    return TrainConfig(data="digits", normal_class=3, backbone="small_cnn", weights=None, ratio=0.1,
                       output="runs/demo")


def demo_config(args):
    return _config(args, _demo_defaults())


def _demo(args) -> int:
    from dlmsvdd_ext import LpSVDD

    from .data.tasks import pixels
    from .experiments import runs
    from .training import metrics

    cfg = demo_config(args)
    print(f"DLM-SVDD demo: scikit-learn digits, normal class {cfg.normal_class}, anomaly ratio {cfg.ratio}, "
          f"small CNN, {cfg.kernel} kernel, {cfg.training_params()['epochs']} epochs")
    model, result, folder = runs.train(cfg)
    _print_result(result, folder)
    if cfg.data != "digits":
        return 0
    task = runs.build_task(cfg)  # the same task, to put raw-pixel LpSVDD beside it
    X_test, t_test = pixels(task.test)
    # the boundary DLM-SVDD fits (its p, nu, slack scale and bandwidth rule) on the pixels instead of the CNN's features
    baseline = LpSVDD(p=cfg.p, nu=model.svdd_.nu_, slack_scale=model.svdd_.slack_scale, gamma=cfg.gamma,
                      random_state=cfg.seed).fit(*pixels(task.train))
    print(f"for comparison, LpSVDD on raw pixels: test AUROC {metrics.auroc(t_test, baseline.dissimilarity(X_test)):.4f}")
    return 0


def _evaluate(args) -> int:
    from .experiments import runs
    from .training import metrics

    out = _output_file(args.json, "--json")
    model = runs.load_model(args.run, device=args.device)
    cfg = model.config
    if args.root:
        cfg.root = args.root
    task = runs.build_task(cfg)
    name = args.split or "test"
    f, targets = model.scores(getattr(task, name))
    result = {"split": name, **metrics.summary(targets, f, model.threshold_), "n": len(f)}
    print(json.dumps(result, indent=2))
    if out is not None:
        _write(out, json.dumps(result, indent=2) + "\n", "--json")
    return 0


def _load_npy(path: str):
    """The array of a .npy file, or of an .npz file: its only array, or the one named X."""
    import numpy as np

    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"--npy {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"--npy {path!r} is not a numpy .npy array file ({err})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        return loaded
    with loaded:
        names = loaded.files
        if len(names) != 1 and "X" not in names:
            raise ValueError(f"--npy {path!r} is an .npz file of {len(names)} arrays ({', '.join(names[:10])}); "
                             "it is read when it holds one array, or one named X")
        try:
            return loaded[names[0] if len(names) == 1 else "X"]
        except (OSError, ValueError) as err:
            raise ValueError(f"--npy {path!r}: its array cannot be read ({err})") from None


def _score(args) -> int:
    import numpy as np

    from .data.preprocessing import ImageFiles, image_files
    from .data.vectors import VectorPreprocessing
    from .experiments import runs

    given = "--npy" if args.npy else "--images" if args.images else "--csv" if args.csv else None
    if given and (args.split or args.root):
        raise ValueError(f"{given} scores the images given, --{'split' if args.split else 'root'} a split of the "
                         f"model's task: give one or the other")
    out = _output_file(args.output, "--output")
    images = _load_npy(args.npy) if args.npy else None
    model = runs.load_model(args.run, device=args.device)
    if args.csv:  # table rows as cells: text categories and missing cells go through the model's rule
        from .data.tables import read_rows

        if not isinstance(model.stored_preprocessing(), VectorPreprocessing):
            raise ValueError("--csv scores a table's rows, and this model takes images: give them with --images or --npy")
        images = read_rows(args.csv, model.config.label_column)
    if args.fpr is not None or args.fdr is not None:  # refused before scoring: no calibration, a level out of reach
        model.decide(np.zeros(0), fpr=args.fpr, fdr=args.fdr)
    files = None
    if args.images:
        if isinstance(model.stored_preprocessing(), VectorPreprocessing):
            raise ValueError("this model takes feature vectors, not image files: give them with --npy FILE")
        files = image_files(args.images)
        f, targets = model.scores(ImageFiles(files, model.stored_preprocessing()))
    elif images is not None:  # raw inputs; the model preprocesses them and checks their shape
        if args.npy and not np.issubdtype(images.dtype, np.number):
            raise ValueError(f"--npy {args.npy!r} holds {images.dtype} values, not numbers")
        f, targets = model.dissimilarity(images), None  # raw rows carry no labels: no target column
    else:
        cfg = model.config
        if args.root:
            cfg.root = args.root
        f, targets = model.scores(getattr(runs.build_task(cfg), args.split or "test"))
    extra_header, extra = [], None
    if args.explain is not None:
        if images is None:
            raise ValueError("--explain explains the rows given with --npy or --csv (images too: as a .npy array)")
        from .experiments.explanations import explained_columns

        extra_header, extra = explained_columns(model, images, args.explain, out, not isinstance(
            model.stored_preprocessing(), VectorPreprocessing), args.explain_method)
    predictions = model.decide(f, fpr=args.fpr, fdr=args.fdr)
    # conformal p-values from the model's calibration normals; blank for a model without them
    p_values = [""] * len(f) if model.calibration_ is None else [f"{p:.9g}" for p in model.calibration_.p_values(f)]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    if files is not None:
        writer.writerow(["file", "dissimilarity", "p_value", "prediction"])
        writer.writerows((str(p), f"{s:.9g}", pv, c) for p, s, pv, c in zip(files, f, p_values, predictions))
    elif targets is None:
        writer.writerow(["index", "dissimilarity", "p_value", "prediction", *extra_header])
        writer.writerows((i, f"{s:.9g}", pv, c, *(extra[i] if extra else ()))
                         for i, (s, pv, c) in enumerate(zip(f, p_values, predictions)))
    else:  # a split of the task: its targets in the convention of the predictions, +1 normal, -1 anomaly
        writer.writerow(["index", "target", "dissimilarity", "p_value", "prediction"])
        writer.writerows((i, t, f"{s:.9g}", pv, c) for i, (t, s, pv, c) in enumerate(zip(targets, f, p_values,
                                                                                           predictions)))
    if out is not None:
        _write(out, text.getvalue(), "--output")
    else:
        sys.stdout.write(text.getvalue())
    return 0


def _export(args) -> int:
    from .experiments import runs
    from .training import export

    model = runs.load_model(args.run)
    output = args.output
    if output is None:
        folder = Path(args.run) if Path(args.run).is_dir() else Path(args.run).parent
        output = folder / f"model{export.SUFFIXES[args.format]}"
    path = model.export(output, format=args.format, input_dtype=args.input_dtype)
    kind = "uint8 or float32" if args.format == "torchscript" else args.input_dtype
    print(f"wrote {path} ({args.format}): input 'images', {model.stored_preprocessing().expects()} (this file: {kind}); "
          f"outputs 'dissimilarity' (higher = more anomalous), 'decision' (+1 normal, -1 anomaly: "
          f"dissimilarity >= {model.threshold_:.6g}) and 'p_value' (conformal, from {model.n_calibration_} "
          f"calibration normals{'; NaN: none held' if model.calibration_ is None else ''})")
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
    from dlmsvdd_ext import __version__
    from dlmsvdd_ext.explain import METHODS as EXPLAIN_METHODS

    from .training.config import TrainConfig
    from .training.export import FORMATS, INPUT_DTYPES

    parser = argparse.ArgumentParser(prog="dlmsvdd", description="Deep Large-Margin lp-SVDD.", formatter_class=_Help)
    parser.add_argument("--version", action="version", version=f"dlmsvdd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser = _with_formatter(sub.add_parser)
    b = sub.add_parser("bench", help="time the compiled RBF kernels against torch on this machine")
    b.add_argument("--size", type=_size, action="append", metavar="NxD",
                   help="problem size, repeatable (default: 4000x512, 6000x2048, 20000x64)")
    b.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size")
    b.add_argument("--json", metavar="FILE", help="also write the timings as JSON")
    _add_verbose(b)
    b.set_defaults(func=_bench)

    d = sub.add_parser("demo", help="train on scikit-learn's digits with a small CNN (about a minute on a CPU)")
    _add_train_flags(d, _demo_defaults())
    d.set_defaults(func=_demo)

    t = sub.add_parser("train", help="train DLM-SVDD on a one-vs-rest task and write a run folder (no flags: "
                       "digits, small CNN)")
    t.add_argument("--config", metavar="YAML", help="configuration file; flags override it")
    t.add_argument("--resume", metavar="RUN", help="continue the unfinished run in folder RUN from its last "
                   "checkpoint, with its own configuration (--verbose and --device may change)")
    _add_train_flags(t, TrainConfig())
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
    w.add_argument("--cpus-per-task", type=float, default=1, help="ray: CPUs each task asks for")
    w.add_argument("--gpus-per-task", type=float, default=0, help="ray: GPUs each task asks for")
    w.add_argument("--verbose", type=int, choices=VERBOSE, default=1, help="0: no progress bar; 2: tracebacks of errors")
    w.set_defaults(func=_sweep)

    p = sub.add_parser("presets", help="list the preset sweeps, or show one resolved (a dry run)")
    p.add_argument("preset", nargs="?", help="a preset name or preset YAML file to show")
    _add_preset_flags(p)
    _add_verbose(p)
    p.set_defaults(func=_presets)

    r = sub.add_parser("report", help="tables (CSV, Markdown) and plots of a finished sweep folder")
    r.add_argument("folder", help="the sweep folder (one sub-folder per task, each with result.json)")
    r.add_argument("--output", help="write here (default: the sweep folder)")
    r.add_argument("--method", help="config fields that name a method, comma-separated (default: those that vary)")
    _add_verbose(r)
    r.set_defaults(func=_report)

    for name, text in (("evaluate", "metrics of a trained model on a split of its task"),
                       ("score", "per-sample dissimilarity, conformal p-value and prediction as CSV")):
        e = sub.add_parser(name, help=text)
        e.add_argument("run", help="run folder or checkpoint file")
        e.add_argument("--split", choices=("train", "val", "test"), help="the split of the model's task (default: test)")
        e.add_argument("--root", help="data root, if it moved since training")
        e.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: where the model was trained, or the "
                                        "CPU on a machine without that device)")
        _add_verbose(e)
        if name == "evaluate":
            e.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
            e.set_defaults(func=_evaluate)
        else:
            given = e.add_mutually_exclusive_group()
            given.add_argument("--npy", metavar="FILE",
                               help="score raw inputs from a .npy file (or an .npz file: its only array, or X), through the preprocessing the model was "
                                    "trained with: images (N, C, H, W) or grey (N, H, W), uint8 or float in "
                                    "[0, 1]; a table's model: feature vectors (N, D)")
            given.add_argument("--csv", metavar="FILE",
                               help="score the rows of a .csv table (a table's model): its columns by name, "
                                    "categories and missing cells by the model's rule; a label column is left out")
            given.add_argument("--images", nargs="+", metavar="FOLDER|FILE",
                               help="score image files (PNG, JPEG, ...; folders searched recursively) through "
                                    "the preprocessing the model was trained with")
            e.add_argument("--output", metavar="CSV", help="write here instead of standard output")
            e.add_argument("--explain", type=int, metavar="K",
                           help="with --npy or --csv: the K columns most responsible for each row's dissimilarity "
                                "(by name) and their attributions, as columns topI, topI_attribution; images: the K "
                                "pixels, and every map written beside --output as CSV.explain.npy and "
                                "CSV.explain/INDEX.png (DLMSVDD.explain)")
            e.add_argument("--explain-method", choices=EXPLAIN_METHODS, default="auto",
                           help="how --explain attributes: auto (range for vectors and tables, integrated for "
                                "images), range (how far each column lies outside the range its training "
                                "look-alikes hold, in standard deviations), repair (how much f falls when it is "
                                "put back) or integrated (integrated gradients of f); see DLMSVDD.explain")
            rule = e.add_mutually_exclusive_group()
            rule.add_argument("--fpr", type=float, metavar="LEVEL",
                              help="predict by conformal p-value <= LEVEL: each normal sample is flagged with "
                                   "probability at most LEVEL (default: the model's threshold)")
            rule.add_argument("--fdr", type=float, metavar="LEVEL",
                              help="predict by Benjamini-Hochberg over the samples scored: the expected share of "
                                   "normal samples among those flagged is at most LEVEL")
            e.set_defaults(func=_score)

    x = sub.add_parser("export", help="write a trained model as one self-contained scorer: raw images in, "
                                      "dissimilarity, decision and conformal p-value out")
    x.add_argument("run", help="run folder or checkpoint file")
    x.add_argument("--format", choices=FORMATS, default="onnx", help="onnx (needs the export extra) or torchscript")
    x.add_argument("--output", metavar="FILE", help="default: model.onnx or model.torchscript.pt beside the checkpoint")
    x.add_argument("--input-dtype", choices=tuple(INPUT_DTYPES), default="float32",
                   help="ONNX: the images' type, float32 in [0, 1] or uint8 (TorchScript takes both)")
    _add_verbose(x)
    x.set_defaults(func=_export)
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; a flag the command does not know is refused with the command's own usage."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    """--verbose for a command without progress bars: every command takes 0 to 2 (2: tracebacks of errors)."""
    parser.add_argument("--verbose", type=int, choices=VERBOSE, default=1, help="2: tracebacks of errors")


def _with_formatter(add_parser):
    """Sub-commands show their defaults in --help too."""
    def add(*args, **kwargs):
        return add_parser(*args, formatter_class=_Help, **kwargs)
    return add


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"dlmsvdd {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if getattr(args, "verbose", None) == 2:  # not an out-of-range --verbose 7: that is the mistake to report
            raise
        # bad input (ValueError), a file that cannot be read or written, a missing optional package: the
        # user's to fix, said in one line; anything else is a bug, reported with a way to its traceback
        mistake = isinstance(err, (ValueError, OSError, ImportError))
        text = str(err) if mistake else f"{type(err).__name__}: {err} (a bug? --verbose 2 shows the traceback)"
        print(f"dlmsvdd {args.command}: error: {text}", file=sys.stderr)
        return 2 if mistake else 1


if __name__ == "__main__":
    sys.exit(main())
