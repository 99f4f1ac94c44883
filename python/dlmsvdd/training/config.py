"""The run configuration: the task, the model, the boundary and the optimiser,
with the paper's defaults, read from keyword arguments, a YAML file or flags.

Every field is checked for type and range by ``validate``, each by one owner:
the boundary's fields by LpSVDD's table (``dlmsvdd_ext.params``, under the
config's names), the driver's own fields by ``CONSTRAINTS`` below (the same
style), whose entries default to what the field's annotation says (``str |
None``: a string or None); every number has a range there. Values read from
text (a YAML file, ``--set``, flags) go through ``typed`` first, which turns
numbers written as strings into numbers (YAML 1.1 reads ``1e-3`` as a string).

A free-form field (``extra``: a dict of notes) holds JSON values only, of
bounded size (``FREE_FORM_LIMIT``), counted as the stored file will spell them
out: a YAML alias bomb is refused before it is expanded.

What a run uses is ``resolved()``: every field, with the recipe's values in
place of the ones left None; a run folder stores it beside the fields as asked.

One exception: no pretrained weights unless asked for (they are not shipped),
and then backbone "auto" is the small CNN for images and the MLP for feature
vectors; ``weights="imagenet"`` gives the paper's ResNet-50 (the presets ask for
it). "auto" stays in the configuration as given and is resolved where the data
are known (``resolved_backbone``): the arrays API takes images and vectors alike."""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from dlmsvdd_ext import params as boundary_params

from ..data.sources import DATASETS
from .checkpoints import RENAMED_FIELDS, RUN_ONLY
from .models import (BACKBONES, MLP_LAYERS, MLP_WIDTH, RESNETS, SMALL_CNN_BRANCH_NORM, SMALL_CNN_BRANCHES,
                     SMALL_CNN_MIN_SIZE, SMALL_CNN_WIDTH, small_cnn_parameters)
from .lr_schedule import SCHEDULES
from .precision import PRECISIONS
from .selection import RULES

SELECTIONS = ("auroc", "balanced_accuracy")
# The scratch recipe on images trained on the CPU, by the data's size (issue 50): the four-branch small
# CNN sees at most this many training rows in the omega-steps over the fit (30 epochs of every digits
# task: at most 1,000 training rows); past it one branch sees ONE_BRANCH_WORK times as many. 35,000 (one
# branch: 210,000 rows) keeps the largest Fashion-MNIST task (ratio 0.75, 8,400 rows: 25 epochs) within
# 5 minutes on the 2-core AMD EPYC CI runs on: 254 s idle at two threads, where 30 epochs took 290 s and,
# another day, 337 s; at ratio 0.75 it cost 0.0007 of the table's mean test AUROC against 30 epochs
# (validation: the same mean), and ratios 0.1 and 0.5 keep their 30 (docs/results/paper-protocol.md,
# "The CPU's budget"). 75,000 before was that clock on a machine about twice as fast (the 30 epochs in
# 141 s). A budget of the CPU's clock: a fit on a GPU trains the recipe's network for 30 epochs (the
# whole table in 254 s on one H200).
BUDGET_ROWS = 35_000
# Past the budget the small CNN from scratch trains one branch before it trains fewer epochs: an epoch of
# one branch is about ONE_BRANCH_WORK times less work than the recipe's four (Fashion-MNIST at ratio 0.75,
# one thread: 8.9 s against 52 s an epoch), so the budget then buys that many times the rows. On the
# Fashion-MNIST table one branch at 30 epochs scored 0.0035-0.0056 above four at the budget's epochs and
# within 0.0025 of four at 30 (docs/user-guide/detector.md, "Recipes").
ONE_BRANCH_WORK = 6
DIVERGENCE = ("rollback", "error")
# nu="auto" with labelled anomalies (without them nu is 1, one-class SVDD), the recipe's
# "labelled_nu": the paper's 1.2 in its recipe and for the MLP on feature vectors (the deep model's
# semi-supervised results, docs/results/adbench.md, were measured at 1.2); SCRATCH_IMAGES_NU for a
# network from scratch on images, chosen on validation AUROC (issue 50, seed 0): CIFAR-10's ten classes
# at ratio 0.1 0.8665 -> 0.8819 (7 of 10 up), Fashion-MNIST's look-alike classes +0.0012 (-0.0019 at
# ratio 0.1, +0.0043 at 0.75), digits -0.0017 at ratio 0.1 and +0.0001 / +0.0002 at 0.5 / 0.75
# (docs/results/paper-protocol.md). It gives the labelled anomalies a larger share of the centre's
# weights (the anomalies' alphas sum to (nu - 1) / 2). LpSVDD's own "auto" takes 20
# (dlmsvdd_ext.svdd.NU_WITH_ANOMALIES), chosen for fixed features.
NU_WITH_ANOMALIES = 1.2
SCRATCH_IMAGES_NU = 5.0
# slack_scale="auto" with labelled anomalies (1 without), the recipe's "labelled_slack_scale": the slack
# penalties c1, c2 are that multiple of the paper's 1 / |I_N|, 1 / |I_A| (LpSVDD's slack_scale). At
# the paper's 1 slack is so cheap that b_N lies below every normal sample's f (CIFAR-10 class 0 at
# nu 5 after three epochs: b_N = -2.45, f of the normals 0.06 to 2.53), so every normal sample
# violates the margin and the omega-step weighs them all alike (sigmoid 0.92 to 0.99); ten times dearer
# slack brings the margins near the data (the same epochs: b_N = 0.14, normals' f 0.33 to 1.12, weights
# 0.55 to 0.73; b_A among the anomalies). SCRATCH_IMAGES_SLACK_SCALE for a network from scratch on
# images, chosen on validation AUROC (issue 50, seed 0; docs/results/paper-protocol.md).
PAPER_SLACK_SCALE = 1.0
SCRATCH_IMAGES_SLACK_SCALE = 10.0
# softplus_scale="auto" with labelled anomalies (1 without), the recipe's "labelled_softplus_scale": the
# sharpness s of the margin-violation loss, softplus(s x) / s, whose slope sigmoid(s x) weighs a sample
# in the network step. At the paper's 1 the weights hardly differ over the violations x the boundary
# leaves (CIFAR-10 class 0 after three epochs, 10th to 90th percentile: the normals' x 0.24 to 0.81,
# weights 0.56 to 0.69; the anomalies' -0.41 to 0.47, weights 0.40 to 0.62): the anomalies the margin
# already separates pull nearly as hard as those it does not. At 4 they weigh 0.16 to 0.87.
# SCRATCH_IMAGES_SOFTPLUS_SCALE for a network from scratch on images, chosen on validation AUROC
# (issue 50, seed 0; docs/results/paper-protocol.md, "The sharpness of the loss"). Without labels
# (one-class fits) it stays 1: a sharper loss was not measured there.
PAPER_SOFTPLUS_SCALE = 1.0
SCRATCH_IMAGES_SOFTPLUS_SCALE = 4.0
# The omega-steps' learning rate with labelled anomalies when lr is left to the recipe, the recipe's
# "labelled_lr" (without them, and for step 0's autoencoder, the recipe's "lr"): the recipe's lr but
# SCRATCH_IMAGES_LABELLED_LR for a network from scratch on images, chosen on validation AUROC (issue 50,
# seed 0, paired on one machine; docs/results/paper-protocol.md, "The learning rate with labels"): against
# the recipe's 1e-3, Fashion-MNIST's look-alike classes +0.0041 / +0.0005 / +0.0022 at ratios 0.1 / 0.5 /
# 0.75, CIFAR-10's classes 0-3 +0.0005 and digits +0.0013 at 0.1. Without labels it was not measured.
SCRATCH_IMAGES_LABELLED_LR = 2e-3
# ema_half_life=None with labelled anomalies, the recipe's "labelled_ema_half_life": the half-life in epochs
# of the moving average of the network's weights that each epoch's boundary, validation and selection read
# (training.weight_average; 0: none, the paper's). SCRATCH_IMAGES_EMA_HALF_LIFE for a network from scratch on
# images, chosen on validation AUROC (issue 50, seed 0, paired on one machine; docs/results/paper-protocol.md,
# "paper-protocol-ema"): against none, Fashion-MNIST's look-alike classes -0.0009 / +0.0012 / +0.0021 at ratios
# 0.1 / 0.5 / 0.75, CIFAR-10's classes 0-3 +0.0053 and digits 0.0000 at 0.1. Without labels it was not
# measured: none.
SCRATCH_IMAGES_EMA_HALF_LIFE = 1.0
# deep_sad_weight=None with labelled anomalies, the recipe's "labelled_deep_sad_weight": the weight of Deep SAD's
# loss added to the margin loss in every omega-step of the joint epochs (training.deep_sad.anchored_loss: its
# centre and scale from the training features as the epochs start; 0: none, the paper's). The margin loss lets
# a row go once its margin holds; Deep SAD's keeps drawing the normals together and the anomalies apart, and the
# boundary reads such features well (on CIFAR-10 0.010 above DLM-SVDD's own, issue 50). SCRATCH_IMAGES_DEEP_SAD_WEIGHT
# for a network from scratch on images, chosen on validation AUROC (issue 50, seed 0, paired on one machine;
# docs/results/paper-protocol.md, "paper-protocol-joint-deep-sad"): 1 against none; then 3 against 1
# ("paper-protocol-deep-sad-weight"): Fashion-MNIST's look-alike classes +0.0030 / +0.0004 / +0.0001 at ratios
# 0.1 / 0.5 / 0.75, CIFAR-10's classes 0-3 +0.0019 and digits 0.0000 at 0.1. Without labels it was not
# measured: none.
SCRATCH_IMAGES_DEEP_SAD_WEIGHT = 3.0
# How a network is trained, for the fields left at None: the paper's (its backbones start from
# pretrained weights), and the one for a backbone trained from scratch: step 0 on the task's own
# training images (training.pretrain), the larger step of a network that starts far from a good
# representation, and the epoch selection that small validation sets can support
# (training.selection). docs/user-guide/detector.md, "Recipes".
RECIPES = {"paper": {"lr": 1e-4, "labelled_lr": 1e-4, "lr_schedule": "constant", "pretrain": "none",
                     "selection_rule": "best", "epochs": 30,
                     "cnn_width": SMALL_CNN_WIDTH, "cnn_branches": 1, "cnn_branch_norm": True, "mlp_width": MLP_WIDTH,
                     "mlp_layers": MLP_LAYERS,
                     "self_labelling": 0.0, "epoch_rows": 0, "budget_rows": 0, "labelled_nu": NU_WITH_ANOMALIES,
                     "labelled_slack_scale": PAPER_SLACK_SCALE,
                     "labelled_softplus_scale": PAPER_SOFTPLUS_SCALE, "labelled_ema_half_life": 0.0,
                     "labelled_deep_sad_weight": 0.0},
           "scratch": {"lr": 1e-3, "labelled_lr": SCRATCH_IMAGES_LABELLED_LR, "lr_schedule": "constant",
                       "pretrain": "batchnorm", "selection_rule": "latest", "epochs": 30,
                       "cnn_width": SMALL_CNN_WIDTH, "cnn_branches": 4, "cnn_branch_norm": True,
                       "mlp_width": MLP_WIDTH,
                       "mlp_layers": MLP_LAYERS, "self_labelling": 0.0, "epoch_rows": 0, "budget_rows": BUDGET_ROWS,
                       "labelled_nu": SCRATCH_IMAGES_NU, "labelled_slack_scale": SCRATCH_IMAGES_SLACK_SCALE,
                       "labelled_softplus_scale": SCRATCH_IMAGES_SOFTPLUS_SCALE,
                       "labelled_ema_half_life": SCRATCH_IMAGES_EMA_HALF_LIFE,
                       "labelled_deep_sad_weight": SCRATCH_IMAGES_DEEP_SAD_WEIGHT}}
# A recipe's values that differ for one backbone. The MLP from scratch on feature vectors trains 15
# epochs: chosen on ADBench's development sets by validation AUROC on rows held out of each task's
# training rows (tests/benchmarks/adbench_selection.py, DEEP_CANDIDATES: 0.8455 at 15 epochs against
# 0.8355 at 30, in half the time; LpSVDD's labelled-anomaly nu and bandwidth scored below both).
# Self-labelling without labels (training.self_labels) for the MLP on feature vectors: on ADBench's
# unsupervised protocol (contaminated training rows) it raised the mean test AUROC from 0.687 to 0.740;
# on digits one-class (clean training images of one class, the small CNN) it lowered it (seed 0: 0.986
# -> 0.941 for class 8, 0.991 -> 0.917 for class 9): images train one-class (docs/results/adbench.md).
# On big tables (above dlmsvdd_ext.kernel_choice.EXACT_MAX_ROWS training rows) the MLP's epochs each
# train on a fresh draw of EPOCH_ROWS of them (training.epoch_rows, which gives the measurements; the
# final boundary on all of them).
EPOCH_ROWS = 4096
BACKBONE_RECIPES = {("scratch", "mlp"): {"labelled_lr": 1e-3, "epochs": 15, "self_labelling": 0.05,
                                         "epoch_rows": EPOCH_ROWS,
                                         "budget_rows": 0, "labelled_nu": NU_WITH_ANOMALIES,
                                         "labelled_slack_scale": PAPER_SLACK_SCALE,
                                         "labelled_softplus_scale": PAPER_SOFTPLUS_SCALE,
                                         "labelled_ema_half_life": 0.0, "labelled_deep_sad_weight": 0.0}}


def resolved_for_labels(value, has_anomalies: bool, labelled: float) -> float:
    """The value a fit uses of a field that "auto" leaves to the labels (``nu``, ``slack_scale``):
    ``value`` itself, or for "auto" ``labelled`` (the recipe's) with labelled anomalies and 1 without."""
    if value != "auto":
        return float(value)
    return labelled if has_anomalies else 1.0


def omega_lr(params: dict, lr_given: bool, has_anomalies: bool) -> float:
    """The omega-steps' learning rate before the schedule: ``params`` (``training_params``) "lr",
    which is the value given when ``lr_given``, else with labelled anomalies the recipe's "labelled_lr"."""
    return params["labelled_lr"] if has_anomalies and not lr_given else params["lr"]


def with_labels_only(params: dict, field: str, given: float | None, has_anomalies: bool) -> float:
    """The value a fit uses of a field that only labelled anomalies turn on when it is left to the
    recipe (``ema_half_life``, ``deep_sad_weight``): ``given``, or for None the recipe's
    "labelled_<field>" (``params``: ``training_params``) with labelled anomalies and 0 (off) without."""
    if given is not None:
        return float(given)
    return params["labelled_" + field] if has_anomalies else 0.0


# the fields that shape the small CNN, which no other backbone has, and the shape of the small
# CNNs saved before each field existed
SMALL_CNN_FIELDS = {"cnn_width": SMALL_CNN_WIDTH, "cnn_branches": SMALL_CNN_BRANCHES,
                    "cnn_branch_norm": SMALL_CNN_BRANCH_NORM}
MLP_FIELDS = {"mlp_width": MLP_WIDTH, "mlp_layers": MLP_LAYERS}  # the MLP's, likewise
SHAPE_FIELDS = {"small_cnn": SMALL_CNN_FIELDS, "mlp": MLP_FIELDS}  # built-in backbone -> the fields that shape it
# "batchnorm": the BatchNorm statistics on the training images; "autoencoder": pretrain_steps of an
# autoencoder, then the statistics; "deep_sad": pretrain_steps of Deep SAD's training (training.deep_sad),
# then the statistics (training.pretrain)
PRETRAINS = ("none", "batchnorm", "autoencoder", "deep_sad")
# The small CNN is the small alternative to the ResNets: at most as many parameters as ResNet-50
# without its classifier (the largest backbone here, the paper's), which the default (32 wide, 4
# branches: 373,888) is far below. Without a bound, --cnn-branches 100000 started allocating 37 GB.
SMALL_CNN_MAX_PARAMETERS = 23_508_032
# what a free-form field (a dict or list) may hold: this many units, a unit being a value, a key
# or a character of a string (about the size of its JSON in bytes): notes, not data
FREE_FORM_LIMIT = 65536


@dataclass
class TrainConfig:
    """Every option of a DLM-SVDD run, with the paper's defaults.

    The fields are the keyword arguments of ``DLMSVDD``, the keys of a run's
    ``config.yaml`` and of a sweep's ``base``, and the ``dlmsvdd train`` flags
    (``normal_class`` is ``--normal-class``). ``validate`` checks each for type
    and range; fields left at None take their recipe's value (``resolved``).

    Parameters
    ----------
    data : str
        The data set: "digits" (embedded), "fashion_mnist", "cifar10",
        "cifar100", "imagenet_lt", "image_folder", "image_arrays" (images held
        as arrays, ``dlmsvdd.datasets.image_arrays``), or "table" (feature
        vectors from ``path``).
    root : str or None
        Data root (torchvision's layout, or the fetch script's ``cifar10.npz``
        and ``fashion_mnist.npz`` in it; the ImageNet root for "imagenet_lt";
        for "image_arrays" the ``.npz`` file or the folder of ``.npy`` files).
    split_dir : str or None
        Folder of the ImageNet-LT split files (default: ``root``).
    normal_class : int
        The normal class (index); the other classes are anomalies.
    ratio : float or None
        Labelled anomalies per normal training sample (the paper: 0.1, 0.5, 0.75);
        0: none, a run without anomaly labels (one-class, ``nu`` "auto" is 1).
    rho : float or None
        Imbalance ratio of a long-tailed pool (then every other class is anomalous).
    fine_labels : bool
        CIFAR-100: the 100 fine classes instead of the 20 superclasses.
    path : str or None
        Data "table": a .npz file (arrays X, y) or a .csv file with a label
        column; labels 0 normal, 1 anomaly.
    label_column : str
        Data "table" (.csv): the label column's name.
    path_sha256 : str or None
        Data "table": the SHA-256 of the file's bytes. A run records it (with
        ``path`` made absolute) when it trains; whatever re-reads the table for
        it (``evaluate``, ``score``, ``--resume``) refuses a file that no
        longer matches. None: not checked.
    labelled_fraction : float or None
        Data "table": the fraction of the training anomalies given as labelled
        (ADBench's la; the others stay unlabelled among the normal rows).
        None: all of them; 0: none (ADBench's unsupervised protocol: every
        training row unlabelled, anomalies included).
    categorical : list or None
        Table columns to one-hot encode although they hold numbers (names; a
        table without names: positions). Text and pandas ``category`` columns
        are categorical anyway (``dlmsvdd_ext.tabular``).
    missing : str or None
        Missing table cells: None refuses them, naming the row and the column;
        "impute" fills them (numeric: the training median; categorical: a
        category of its own) and adds an indicator column.
    val_fraction : float
        The stratified, seeded share of the training pool held out for
        validation (``validation_fraction`` is scikit-learn's spelling).
    backbone : str
        "small_cnn", "mlp", "resnet18", "resnet50", or "auto": without
        ``weights`` the small CNN for images and the MLP for vectors, with them
        ResNet-50 (the paper's); "custom" when ``DLMSVDD`` is given a module.
    weights : str or None
        "imagenet" (from the local torch cache), a state-dict file, or None
        (from scratch; the default, as pretrained weights are not shipped).
    image_size : int or None
        Resize images to this size (default: 224 for ImageNet weights and
        natural images, else the native size).
    cnn_width : int or None
        The small CNN's first-block channels (None: the recipe's, 32).
    cnn_branches : int or None
        The small CNN's independent branches, their kernel distances averaged
        (None: the recipe's, 4 from scratch, 1 for the paper).
    cnn_branch_norm : bool or None
        With more than one branch, each branch's features L2-normalised apart, so
        that the kernel distance is the mean of the branches' (True), or the
        branches' features concatenated as they are and normalised as one vector
        (False). None: the recipe's, True.
    mlp_width : int or None
        The MLP's hidden width; its features are width // 2 (None: the recipe's, 128).
    mlp_layers : int or None
        The MLP's hidden layers (None: the recipe's, 2).
    frozen : bool
        The paper's "fixed CNN": only the boundary is learned.
    recipe : str
        "paper", "scratch" or "auto" (scratch for a built-in backbone without
        weights, else paper): the values of ``lr``, ``pretrain``,
        ``selection_rule`` and the network's shape fields left at None.
    pretrain : str or None
        Step 0 before the first epoch: "none", "batchnorm" (the BatchNorm
        statistics from the training images), "autoencoder" (then the
        statistics) or "deep_sad" (the network trained for Deep SAD's
        distance to a centre, ``dlmsvdd.training.deep_sad``, at the
        omega-steps' learning rate; then the statistics). None: the recipe's.
    pretrain_steps : int
        The autoencoder's or Deep SAD's steps (``pretrain="autoencoder"`` or
        ``"deep_sad"``).
    kernel : str
        The kernel, as ``LpSVDD``'s ``kernel``: "auto" (default; the exact kernel
        on up to ``dlmsvdd_ext.kernel_choice.EXACT_MAX_ROWS`` = 10,000 rows,
        Nystrom at m = min(n_components, 256) above: an epoch's rows and the
        final boundary's all rows choose each for themselves; the choices are
        in the log, ``model.kernel_`` and the run's result.json), "exact",
        "nystrom", "rff", "qmc_rff", "orf", "sorf", "fastfood" or "rpcholesky".
        Formerly ``backend``, which is refused with this name.
    n_components : int
        The approximation's budget m.
    p : float
        Slack exponent, at least 1.1.
    nu : float or str
        Margin weight, at least 1 (1: one-class SVDD, the only value without
        anomalies), or "auto" (default): with labelled anomalies the recipe's
        (``SCRATCH_IMAGES_NU``, 5, for a network from scratch on images; the
        paper's 1.2, ``NU_WITH_ANOMALIES``, in the paper's recipe and for the
        MLP on feature vectors), 1 when the training set has none, so that
        ``fit(X)`` without labels trains at the defaults.
    c1, c2 : float or None
        Slack penalties of normal and anomalous samples (None: ``slack_scale``
        over their number).
    slack_scale : float or str
        The slack penalties' multiple of one over the class sizes (``LpSVDD``'s
        ``slack_scale``; 1: the paper's), or "auto" (default): with labelled
        anomalies the recipe's (``SCRATCH_IMAGES_SLACK_SCALE``, 10, for a network
        from scratch on images; the paper's 1 in the paper's recipe and for the
        MLP on feature vectors), 1 without.
    self_labelling : float or None
        Without labelled anomalies, this fraction of the training rows, the
        most anomalous to ``LpSVDD`` one-class on the inputs, is labelled
        anomalous before training (``dlmsvdd.training.self_labels``): the
        omega-step then has something to push away instead of collapsing
        the features. 0: none (one-class training, ``nu`` 1). None: the
        recipe's, 0.05 for the MLP on feature vectors, 0 for images.
    epoch_rows : int or None
        The training rows one epoch's three steps use (``dlmsvdd.training.epoch_rows``):
        with more training rows than this and than the exact kernel takes whole
        (``dlmsvdd_ext.kernel_choice.EXACT_MAX_ROWS``, 10,000), each epoch a fresh seeded
        draw of this many (every labelled anomaly kept, up to half of them), the final
        boundary fitted on all of them. 0: every row, every epoch (the paper's). None:
        the recipe's, ``EPOCH_ROWS`` = 4096 for the MLP on feature vectors, 0 for images.
    guard : bool
        The distance guard (``dlmsvdd.training.guard``): rows farther from
        the training mean than every training row score higher with their
        distance, up to the boundary's largest f, whatever the network makes
        of them (its features are L2-normalised: alone they see a row's
        direction only). Rows within the data's radius score as without it.
    input_consensus : bool
        Score rows by the deep model plus the consensus of detectors on the
        input itself (``dlmsvdd.training.input_consensus``). Feature vectors:
        below 256 columns ``LpSVDD`` one-class and an isolation forest, from
        256 on the nearest training row's distance
        (``dlmsvdd_ext.consensus.members_for``); without labelled anomalies the
        score is the consensus alone and the network is not trained (its score
        would weigh nothing). Images without labelled anomalies: the network
        trained one-class beside the nearest training image's distance on its
        pixels and on its contrast-normalised pixels, pooled
        (``dlmsvdd.training.image_views``); with labels images keep the deep
        score alone. False: the deep model's f alone (the paper's model).
    gamma : float or str
        RBF bandwidth: "median" (1 / the initial features' median squared
        distance, estimated once), "local" (10 times that), "per-epoch"
        (re-estimated every epoch) or a value.
    solver : str
        The dual solver: "apg", "pairwise" or "paper".
    fw_max_iter : int
        The solver's iteration limit per alpha-step (``LpSVDD``'s ``max_iter``).
    fw_tol : float
        The certificate's relative tolerance (``LpSVDD``'s ``tol``).
    contamination : float or str
        The threshold without anomalies in validation: the share of new normal
        samples called anomalous, in (0, 0.5] (the rule p-value <= it over the
        validation normals, ``dlmsvdd.training.thresholds``), or "radius" (the
        sphere's r^2).
    epochs : int or None
        Alternating epochs (none with a frozen backbone). None: the recipe's,
        30, or 15 for the MLP from scratch (``BACKBONE_RECIPES``), and fewer
        where ``budget_rows`` asks.
    budget_rows : int or None
        With ``epochs`` left to the recipe, the training rows the omega-steps
        see over the whole fit: epochs = min(the recipe's, ceil(budget_rows /
        training rows)), so that a large training set trains fewer, longer
        epochs; with the small CNN from scratch, a set past the budget first
        trains one branch (``cnn_branches`` left to the recipe), about 6 times
        less work an epoch. 0: the recipe's epochs whatever the size. None: the recipe's,
        ``BUDGET_ROWS`` for the scratch recipe on images trained on the CPU,
        0 otherwise (on a GPU, where 30 epochs of a Fashion-MNIST task take
        under a minute and score higher).
    lr : float or None
        Adam's learning rate (None: the recipe's, 1e-4 for the paper, 1e-3 from scratch).
    lr_schedule : str or None
        The rate over the epochs: "constant", or "cosine" (half a cosine from
        ``lr`` towards zero at the last epoch; ``dlmsvdd.training.lr_schedule``).
        None: the recipe's.
    ema_half_life : float or None
        The half-life, in epochs of network steps, of an exponential moving
        average of the network's weights; each epoch's boundary, validation and
        selection read the average, and the kept weights are the average's
        (``dlmsvdd.training.weight_average``). 0: none (the paper). None: with
        labelled anomalies the recipe's (1 for a network from scratch on
        images, 0 otherwise), without them 0.
    deep_sad_weight : float or None
        The weight of Deep SAD's loss added to the margin-violation loss in
        every omega-step: its centre and scale are the training features' as
        the epochs start, so that the term keeps drawing the normals together
        and pushing the labelled anomalies out after their margins hold
        (``dlmsvdd.training.deep_sad.anchored_loss``). 0: none (the paper).
        None: with labelled anomalies the recipe's (3 for a network from
        scratch on images, 0 otherwise), without them 0.
    weight_decay : float
        Adam's weight decay.
    batch_size : int
        The omega-step's mini-batch size.
    grad_clip : float
        The largest gradient norm of an omega-step (larger ones are scaled down).
    softplus_power : float
        The power of the softplus in the margin-violation loss.
    softplus_scale : float or "auto"
        The sharpness s of the margin-violation loss: softplus(s x)^power / s of
        each margin violation x (1: the paper's softplus; larger ones tend to
        the hinge max(0, x), smaller ones to a linear loss). "auto": with
        labelled anomalies the recipe's (4 for a network from scratch on
        images, the paper's 1 otherwise), 1 without.
    selection : str
        The validation metric that picks the epoch kept: "auroc" or "balanced_accuracy".
    selection_rule : str or None
        "best", or "latest" (the latest epoch within one validation anomaly's
        share of the best). None: the recipe's.
    on_divergence : str
        Non-finite or collapsed training: "rollback" (keep the best epoch
        before it, with a warning) or "error".
    precision : str
        The omega-step's arithmetic on a GPU: "tf32" (float32 tensors,
        convolutions and products on TF32 tensor cores), "float32" (IEEE) or
        "bf16" (the network under bfloat16 autocast). Scores, the features the
        boundary is fitted on, validation and exports are IEEE float32 whatever
        it says (``dlmsvdd.training.precision``).
    channels_last : bool
        Train on images in channels-last (NHWC) memory order, which tensor-core
        convolutions prefer.
    deterministic : bool
        cuDNN's deterministic algorithms during the fit, so that a seed gives
        the same model bit for bit on a GPU too (False: cuDNN may pick faster
        ones that add in any order).
    seed : int
        The seed of every random draw, 0 to 2^32 - 1.
    device : str
        "auto" (a CUDA GPU when torch sees one, else the CPU), "cpu", "cuda" or "cuda:N".
    num_workers : int
        Data-loader worker processes.
    verbose : int
        0 quiet, 1 an epoch progress bar, 2 batch bars too (and tracebacks of errors).
    output : str or None
        The run folder (``dlmsvdd train``; default: a name from the task and the time).
    tensorboard : bool
        Also log each epoch's numbers to ``output/tensorboard`` (needs tensorboard).
    extra : dict
        Free-form notes stored with the run: JSON values, at most 65536 values
        and characters.
    """

    # the task
    data: str = "digits"
    root: str | None = None
    split_dir: str | None = None  # ImageNet-LT split files (default: root)
    normal_class: int = 0
    ratio: float | None = 0.1  # labelled anomalies per normal sample
    rho: float | None = None  # long-tailed pool with imbalance rho (then every other class is anomalous)
    fine_labels: bool = False  # CIFAR-100: 100 fine classes instead of 20 superclasses
    # data "table": a .npz (X, y) or .csv file of feature vectors (dlmsvdd.data.tables), its label
    # column (csv: the column's name; 0 normal, 1 anomaly) and the fraction of the training anomalies
    # given as labelled (ADBench's la; the others stay among the unlabelled rows). None: all of them
    path: str | None = None
    label_column: str = "label"
    path_sha256: str | None = None  # the table file's fingerprint, recorded by a run (dlmsvdd.data.tables)
    labelled_fraction: float | None = None
    # tables, in Python and CSV (dlmsvdd_ext.tabular): columns one-hot encoded although numeric, and
    # missing cells refused (None) or imputed ("impute", with indicator columns)
    categorical: list | None = None
    missing: str | None = None
    val_fraction: float = 0.2
    # the network: the paper's is backbone resnet50 (or "auto") with weights "imagenet"
    # small_cnn for images and mlp for vectors when no pretrained weights are asked for, else resnet50
    backbone: str = "auto"
    weights: str | None = None  # "imagenet" (local torch cache), a state-dict file, or None
    image_size: int | None = None  # default: 224 for ImageNet weights and natural images, else native
    # the small CNN's channels in its first block (then twice and four times that; features: four times).
    # None: the recipe's, 32 for both (docs/user-guide/detector.md, "Recipes": 64 is steadier on the development
    # protocol but measured worse on digits' test pool at ratio 0.75)
    cnn_width: int | None = None
    # the small CNN as this many independent branches whose kernel distances are averaged
    # (training.models.SmallCNN). None: the recipe's, 4 from scratch (steadier over seeds), 1 for the paper
    cnn_branches: int | None = None
    # with branches > 1: each branch's features normalised apart (True) or the concatenation as one vector (False;
    # docs/results/paper-protocol.md, "paper-protocol-branch-norm"). None: the recipe's, True
    cnn_branch_norm: bool | None = None
    # the MLP for feature vectors (training.models.MLP): hidden width and hidden layers. None: the recipe's
    mlp_width: int | None = None
    mlp_layers: int | None = None
    frozen: bool = False  # the paper's "fixed CNN": only the boundary is learned
    # "paper", "scratch" or "auto": scratch for a built-in backbone without weights, else paper
    recipe: str = "auto"
    pretrain: str | None = None  # step 0 before the first epoch: one of PRETRAINS; None: the recipe's
    pretrain_steps: int = 100  # of the autoencoder (pretrain="autoencoder")
    # the boundary (alpha-step)
    kernel: str = "auto"
    n_components: int = 1024
    p: float = 2.0
    nu: float | str = "auto"
    c1: float | None = None
    c2: float | None = None
    slack_scale: float | str = "auto"  # c1, c2's multiple of 1 / class size; "auto": the recipe's with labels, else 1
    self_labelling: float | None = None  # without labels: the fraction self-labelled (None: the recipe's)
    epoch_rows: int | None = None  # rows an epoch trains on, a fresh draw each (0: all; None: the recipe's)
    guard: bool = True  # rows beyond the training data's radius score higher with their distance (training.guard)
    input_consensus: bool = True  # the deep score plus the consensus of the input (training.input_consensus)
    gamma: float | str = "median"  # "median": once from the initial features; "per-epoch"; or a fixed value
    solver: str = "apg"
    fw_max_iter: int = 1000
    fw_tol: float = 1e-6
    # the decision threshold without anomalies in validation: the fraction of
    # normal samples called anomalous (0.1, PyOD's default), or "radius" (r^2)
    contamination: float | str = 0.1
    # the omega-step
    epochs: int | None = None  # None: the recipe's (BACKBONE_RECIPES), fewer where budget_rows asks
    budget_rows: int | None = None  # with epochs None: rows the omega-steps see in all (0: no budget; None: the recipe's)
    lr: float | None = None  # None: the recipe's (1e-4 for the paper, 1e-3 from scratch)
    lr_schedule: str | None = None  # "constant" or "cosine" over the epochs (training.lr_schedule); None: the recipe's
    # epochs judged on the weights' moving average of this half-life (training.weight_average; 0: none);
    # None: with labelled anomalies the recipe's (1 from scratch on images), else none
    ema_half_life: float | None = None
    # Deep SAD's loss at this weight beside the margin loss (training.deep_sad.anchored_loss; 0: none); None: with
    # labelled anomalies the recipe's (3 from scratch on images), else none
    deep_sad_weight: float | None = None
    weight_decay: float = 1e-4
    batch_size: int = 128
    grad_clip: float = 1.0
    softplus_power: float = 1.0
    softplus_scale: float | str = "auto"  # with labelled anomalies the recipe's (4 from scratch on images), else 1
    selection: str = "auroc"  # validation metric for the best epoch
    selection_rule: str | None = None  # "best" or "latest" (training.selection); None: the recipe's
    on_divergence: str = "rollback"  # non-finite or collapsed: "rollback" to the best epoch (a warning), or "error"
    # the omega-step's arithmetic on a GPU (training.precision): "tf32", "float32" or "bf16" autocast; every
    # score, feature and export is IEEE float32 whatever this says
    precision: str = "tf32"
    channels_last: bool = False  # images in NHWC memory order during training (faster convolutions on tensor cores)
    deterministic: bool = True  # cuDNN's deterministic algorithms: the same seed, the same model on a GPU too
    # the run
    seed: int = 0
    device: str = "auto"
    num_workers: int = 0
    verbose: int = 1
    output: str | None = None
    tensorboard: bool = False  # also log each epoch's numbers to output/tensorboard (needs tensorboard)
    extra: dict = field(default_factory=dict)  # free-form notes stored with the run

    def validate(self) -> "TrainConfig":
        """Check every field's type and range (see the module's docstring).

        Returns
        -------
        TrainConfig
            This configuration (``weights`` spelled "none" set to None).

        Raises
        ------
        ValueError
            A field of the wrong type or out of its range, with the field's name
            and what it takes.
        """
        if isinstance(self.weights, str) and self.weights.lower() == "none":  # as flags and YAML spell it
            self.weights = None
        if self.backbone != "auto":  # "auto" is checked where the data tell which network it is
            self.check_shape_fields(self.backbone)
        for name in FREE_FORM:  # first: the table's message would spell out the value
            check_free_form(name, getattr(self, name))
        own = {name: getattr(self, name) for name in CONSTRAINTS}
        boundary_params.check(own, table=CONSTRAINTS)
        # the boundary's hyper-parameters are the estimator's: checked by its table, under the config's names
        boundary_params.check(self.boundary_params(), names=self.BOUNDARY_NAMES)
        if self.resolved_backbone() == "small_cnn":
            self._check_small_cnn()
        return self

    def _check_small_cnn(self) -> None:
        """The small CNN this configuration builds takes its images and fits the bound on its size."""
        if self.image_size is not None and self.image_size < SMALL_CNN_MIN_SIZE:
            raise ValueError(f"image_size {self.image_size} is too small for the small CNN: it takes images of "
                             f"{SMALL_CNN_MIN_SIZE} pixels and more (its two 2x2 max-pools halve the size twice)")
        shape = self.training_params()
        width, branches = shape["cnn_width"], shape["cnn_branches"]
        count = small_cnn_parameters(width, branches)
        if count > SMALL_CNN_MAX_PARAMETERS:
            raise ValueError(f"cnn_width {width} with cnn_branches {branches} makes a small CNN of {count:,} parameters "
                             f"({count * 4 / 1e9:.3g} GB of float32 weights); it takes at most "
                             f"{SMALL_CNN_MAX_PARAMETERS:,}, ResNet-50's: lower cnn_branches or cnn_width, or use "
                             "backbone resnet50")

    # LpSVDD's parameter -> the config field that sets it
    BOUNDARY_NAMES = {"max_iter": "fw_max_iter", "tol": "fw_tol"}

    def boundary_params(self) -> dict:
        """The ``LpSVDD`` parameters this configuration sets.

        The trainer adds the seed, warm starts and, under torchrun, the sharded solver.

        Returns
        -------
        dict
            ``LpSVDD``'s parameter names (``kernel``, ``max_iter``, ``tol``, ...) and their values.
        """
        names = {"p", "nu", "c1", "c2", "gamma", "kernel", "n_components", "solver", "max_iter", "tol", "contamination"}
        return {key: getattr(self, self.BOUNDARY_NAMES.get(key, key)) for key in sorted(names)}

    def check_shape_fields(self, backbone: str) -> None:
        """Refuse a field that shapes one built-in backbone set for another.

        Parameters
        ----------
        backbone : str
            The backbone the run builds.

        Raises
        ------
        ValueError
            A ``cnn_*`` field set for a backbone other than the small CNN, or an
            ``mlp_*`` field for one other than the MLP.
        """
        for owner, fields in SHAPE_FIELDS.items():
            for name in fields:
                if getattr(self, name) is not None and backbone != owner:
                    what = {"small_cnn": "small CNN", "mlp": "MLP"}[owner]
                    raise ValueError(f"{name} shapes the {what}; backbone {backbone!r} has its own shape: "
                                     f"leave {name} unset (None)")

    def resolved_backbone(self, vectors: bool | None = None) -> str:
        """The backbone the run builds.

        "auto" is the paper's ResNet-50 with pretrained weights, else the MLP for
        feature vectors and the small CNN for images.

        Parameters
        ----------
        vectors : bool or None
            Whether the inputs are feature vectors (None: those of data "table").

        Returns
        -------
        str
            "small_cnn", "mlp", "resnet18", "resnet50" or "custom".
        """
        if self.backbone != "auto":
            return self.backbone
        if self.weights is not None:
            return "resnet50"
        return "mlp" if (self.data == "table" if vectors is None else vectors) else "small_cnn"

    def training_params(self, vectors: bool | None = None, n_train: int | None = None, device=None) -> dict:
        """The fields a recipe decides, as the run uses them.

        The values given, else the recipe's. Resolved when used, not stored, so
        that a changed backbone or weights changes them.

        Parameters
        ----------
        vectors : bool or None
            Whether the inputs are feature vectors, as in ``resolved_backbone``.
        n_train : int or None
            The training rows, when known: past ``budget_rows``, the small CNN's
            ``cnn_branches`` left to the recipe is then 1 and ``epochs`` left to
            it is cut to the budget (``epochs_for``; one branch's rows count
            1 / ``ONE_BRANCH_WORK``). None: the recipe's network and epochs.
        device : torch.device, str or None
            The device the fit trains on, when known: the recipe's budget is
            the CPU's (``BUDGET_ROWS``), so on another device ``budget_rows``
            left to the recipe is 0.

        Returns
        -------
        dict
            ``backbone``, ``recipe``, ``lr``, ``pretrain``, ``selection_rule``,
            ``epochs`` and the backbone's shape fields (``cnn_*`` or ``mlp_*``).
        """
        backbone = self.resolved_backbone(vectors)
        recipe = self.recipe
        if recipe == "auto":
            # a custom module may come trained: the paper's recipe unless asked for
            recipe = "scratch" if self.weights is None and backbone != "custom" else "paper"
        other_shapes = {k for owner, fields in SHAPE_FIELDS.items() if owner != backbone for k in fields}
        defaults = {**RECIPES[recipe], **BACKBONE_RECIPES.get((recipe, backbone), {})}
        # a recipe's value that no field sets (labelled_nu: nu="auto"'s with labels, labelled_slack_scale
        # likewise) is the recipe's
        values = {key: getattr(self, key, None) for key in defaults if key not in other_shapes}
        params = {"backbone": backbone, "recipe": recipe, **{k: defaults[k] if v is None else v for k, v in values.items()}}
        if self.budget_rows is None and device is not None and torch.device(device).type != "cpu":
            params["budget_rows"] = 0  # the budget is the CPU's clock; a GPU trains the recipe's epochs
        if n_train is not None and self.epochs is None:
            epochs = epochs_for(params["epochs"], params["budget_rows"], n_train)
            if epochs < params["epochs"] and backbone == "small_cnn" and self.cnn_branches is None \
                    and params["cnn_branches"] > 1:  # past the budget: one branch first (ONE_BRANCH_WORK)
                params["cnn_branches"] = 1
                epochs = epochs_for(params["epochs"], params["budget_rows"] * ONE_BRANCH_WORK, n_train)
            params["epochs"] = epochs
        return params

    @staticmethod
    def recorded_run(params: dict, recorded: dict, given=None) -> dict:
        """The network and epochs of a run of this configuration that a state (a training
        checkpoint or a model file) was written by: the shape fields the configuration resolves to,
        then what the run recorded of itself (``checkpoints.run_params``: the network and epochs
        the budget of rows made; empty in states written before them).

        Parameters
        ----------
        params : dict
            ``training_params`` of this configuration.
        recorded : dict
            ``checkpoints.run_params`` of the state.
        given : collection of str or None
            The configuration keys the state holds: a shape field it predates takes the value
            of before (``SHAPE_FIELDS``). None: all of them.

        Returns
        -------
        dict
            Shape fields (and ``epochs`` when recorded), to update ``params`` with.
        """
        shape = SHAPE_FIELDS.get(params["backbone"], {})
        return {**{k: params[k] if given is None or k in given else before for k, before in shape.items()},
                **recorded}

    def resolved(self, vectors: bool | None = None) -> dict:
        """Every field as the run uses it.

        What a run folder stores beside the fields as asked, and what a sweep
        compares. Another backbone's shape fields stay None.

        Parameters
        ----------
        vectors : bool or None
            Whether the inputs are feature vectors, as in ``resolved_backbone``.

        Returns
        -------
        dict
            ``to_dict()`` with ``training_params`` in place of the values left
            to the recipe and "auto".
        """
        return {**self.to_dict(), **self.training_params(vectors)}

    @property
    def imagenet_input(self) -> bool:
        """Whether the network takes ImageNet-normalised RGB at 224 pixels (pretrained ResNet weights)."""
        return self.resolved_backbone() in RESNETS and self.weights is not None

    def to_dict(self) -> dict:
        """The fields as asked.

        Returns
        -------
        dict
            Every field's value, ``extra`` copied.
        """
        for name in FREE_FORM:  # before asdict copies them out: an alias bomb would never finish
            check_free_form(name, getattr(self, name))
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """A checked configuration from values as a YAML file or the command line gives them.

        Parameters
        ----------
        values : dict
            Field names and values; values written as text are read as the
            field's type first (``dlmsvdd.training.config.typed``).

        Returns
        -------
        TrainConfig
            The configuration, validated.

        Raises
        ------
        ValueError
            An unknown key, or a value of the wrong type or out of range.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        for old, new in RENAMED_FIELDS.items():
            if old in values:
                raise ValueError(f"the configuration key {old!r} is now called {new!r} (LpSVDD's name for the same "
                                 f"choice): write {new}={values[old]!r} (--{new.replace('_', '-')} on the command line)")
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown configuration keys {unknown}; known: {sorted(names)}")
        return cls(**{key: typed(key, value) for key, value in values.items()}).validate()

    @classmethod
    def from_yaml(cls, path) -> "TrainConfig":
        """A checked configuration from a YAML file, such as a run folder's ``config.yaml``.

        Parameters
        ----------
        path : str or pathlib.Path
            The file; keys may be spelled with ``-`` for ``_``.

        Returns
        -------
        TrainConfig
            The configuration, validated.

        Raises
        ------
        ValueError
            A missing or malformed file, an unknown key, a bad value, or a
            ``resolved`` section its fields would now resolve otherwise.
        """
        import yaml

        path = Path(path)
        if path.is_dir():
            raise ValueError(f"configuration file {str(path)!r} is a folder; give a YAML file (a run folder's "
                             "config.yaml, say)")
        if not path.is_file():
            raise ValueError(f"configuration file {str(path)!r} does not exist")
        try:
            values = yaml.safe_load(path.read_text()) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is not a valid YAML file: {err}") from None
        if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
            raise ValueError(f"{path}: expected a mapping of configuration keys")
        values = {k.replace("-", "_"): v for k, v in values.items()}
        stored = values.pop(RESOLVED, None)
        cfg = cls.from_dict(values)
        if stored is not None:
            check_resolved(stored, cfg, path)
        return cfg

    def to_yaml_dict(self) -> dict:
        """A run folder's ``config.yaml``.

        Returns
        -------
        dict
            The fields as asked (``train --config`` reads them) and, under
            ``resolved``, what this version resolves them to (``from_yaml`` checks it).
        """
        return {**self.to_dict(), RESOLVED: self.resolved()}


def epochs_for(epochs: int, budget_rows: int, n_train: int) -> int:
    """The epochs a fit of ``n_train`` training rows runs: ``epochs``, or with a budget of rows
    (``budget_rows`` > 0) as many as see it, ceil(budget_rows / n_train), if fewer (at least one)."""
    if budget_rows <= 0 or n_train <= 0:
        return epochs
    return min(epochs, max(1, math.ceil(budget_rows / n_train)))


RESOLVED = "resolved"  # config.yaml's section (and a sweep record's key) of the resolved fields


def check_resolved(stored, cfg: TrainConfig, path) -> None:
    """A config.yaml's ``resolved`` section is a record of what its run used, not read. When
    the file's fields are as that run asked (none set to another explicit value), they must
    still resolve to it: refused otherwise (a recipe that changed since, or an edited
    section), since training with the file would not repeat the run it describes."""
    if not isinstance(stored, dict):
        raise ValueError(f"{path}: 'resolved' must be the mapping a run folder's config.yaml holds")
    asked, now, recipe = cfg.to_dict(), cfg.resolved(), set(cfg.training_params())
    common = [k for k in stored if k in now and k not in RUN_ONLY]
    left_to_recipe = {k for k in recipe if asked.get(k) in (None, "auto")}  # labelled_nu: no field
    if any(asked[k] != stored[k] for k in common if k not in left_to_recipe):
        return  # a new configuration made from the file: the section describes another run
    differ = [k for k in common if stored[k] != now[k]]
    if differ:
        pairs = ", ".join(f"{k}: {now[k]!r}, the section {stored[k]!r}" for k in differ)
        raise ValueError(f"{path}: its fields resolve otherwise than its 'resolved' section, the record of what its run "
                         f"used, says ({pairs}): a recipe changed since or the section was edited, and the section is "
                         "not read: set those fields themselves, or delete the section")



class _DeviceName:
    """'auto' or a string that torch.device parses (whether this machine has
    that device is the trainer's question, when it starts)."""

    def is_satisfied_by(self, value) -> bool:
        if value == "auto":
            return True
        try:
            return isinstance(value, str) and torch.device(value) is not None
        except (RuntimeError, ValueError):
            return False

    def __str__(self) -> str:
        return "'auto' or a torch device such as 'cpu', 'cuda' or 'cuda:1'"


class _Seed:
    """An integer numpy and scikit-learn take as a seed: 32 bits (a larger one failed
    inside train_test_split)."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, Integral) and not isinstance(value, bool) and 0 <= value < 2**32

    def __str__(self) -> str:
        return f"an integer in [0, {2**32 - 1}] (a 32-bit seed, as numpy takes)"


def _positive(kind):
    return Interval(kind, 0, math.inf if kind is Real else None, closed="neither")


def _at_least(kind, low):
    return Interval(kind, low, math.inf if kind is Real else None, closed="left")


# The driver's own fields with a range or a set of options; None allowed where the annotation allows it.
_RANGES = {
    "data": [StrOptions(set(DATASETS))],
    "normal_class": [_at_least(Integral, 0)],
    "ratio": [Interval(Real, 0, 10, closed="both")],  # labelled anomalies per normal sample; 0: none (no labels)
    "rho": [_at_least(Real, 1)],
    "val_fraction": [Interval(Real, 0, 1, closed="neither")],
    "backbone": [StrOptions(set(BACKBONES) | {"auto", "custom"})],
    "image_size": [_positive(Integral)],
    "cnn_width": [_positive(Integral)],
    "cnn_branches": [_positive(Integral)],
    "mlp_width": [Interval(Integral, 2, 1 << 16, closed="both")],  # its features: width // 2
    "mlp_layers": [Interval(Integral, 0, 64, closed="both")],
    "labelled_fraction": [Interval(Real, 0, 1, closed="both")],  # 0: no training anomaly labelled
    "missing": [StrOptions({"impute"})],
    "epochs": [_at_least(Integral, 0)],
    "lr": [_positive(Real)],
    "lr_schedule": [StrOptions(set(SCHEDULES))],
    "ema_half_life": [Interval(Real, 0, None, closed="left")],
    "deep_sad_weight": [Interval(Real, 0, None, closed="left")],
    "weight_decay": [_at_least(Real, 0)],
    "batch_size": [_positive(Integral)],
    "grad_clip": [_positive(Real)],
    "softplus_power": [_positive(Real)],
    "softplus_scale": [_positive(Real), StrOptions({"auto"})],
    "slack_scale": [_positive(Real), StrOptions({"auto"})],
    "self_labelling": [Interval(Real, 0, 0.5, closed="left")],
    "epoch_rows": [_at_least(Integral, 0)],
    "budget_rows": [_at_least(Integral, 0)],
    "selection": [StrOptions(set(SELECTIONS))],
    "selection_rule": [StrOptions(set(RULES))],
    "recipe": [StrOptions({"auto", *RECIPES})],
    "pretrain": [StrOptions(set(PRETRAINS))],
    "pretrain_steps": [_at_least(Integral, 0)],
    "on_divergence": [StrOptions(set(DIVERGENCE))],
    "precision": [StrOptions(set(PRECISIONS))],
    "seed": [_Seed()],
    "device": [_DeviceName()],
    "num_workers": [_at_least(Integral, 0)],
    "verbose": [Interval(Integral, 0, 2, closed="both")],  # 0 quiet, 1 epoch bar, 2 batch bars and tracebacks
}
_TYPES = {name: typing.get_args(hint) or (hint,) for name, hint in typing.get_type_hints(TrainConfig).items()}


def _table() -> dict:
    """CONSTRAINTS: each driver field's range (or options), else its annotation's types."""
    boundary = {TrainConfig.BOUNDARY_NAMES.get(key, key) for key in TrainConfig().boundary_params()}
    table = {}
    for name, kinds in _TYPES.items():
        if name in boundary:
            continue
        if name not in _RANGES and (int in kinds or float in kinds):
            raise TypeError(f"TrainConfig.{name} is a number without a range in _RANGES")
        plain = [{bool: "boolean", type(None): None}.get(kind, kind) for kind in kinds]
        table[name] = _RANGES[name] + ([None] if type(None) in kinds else []) if name in _RANGES else plain
    return table


CONSTRAINTS = _table()
# the free-form fields: any dict or list field (their contents have no table)
FREE_FORM = tuple(name for name, kinds in _TYPES.items() if dict in kinds or list in kinds)


def check_free_form(name: str, value) -> None:
    """``value`` (field ``name``) holds JSON values (None, booleans, numbers, strings; lists,
    and dicts keyed by strings) of at most ``FREE_FORM_LIMIT`` units. The walk counts a value
    each time it is reached, so that shared (YAML alias) and self-containing values count as
    the stored file would spell them, and it stops at the limit: its work is bounded too."""
    units, stack = 0, [value]
    while stack:
        item = stack.pop()
        units += 1 + (len(item) if isinstance(item, str) else 0)
        if units > FREE_FORM_LIMIT:
            raise ValueError(f"{name} holds more than {FREE_FORM_LIMIT} values and characters (repeated YAML aliases "
                             f"count each time they are used): keep {name} to short notes")
        if isinstance(item, dict):
            keys = [key for key in item if not isinstance(key, str)]
            if keys:
                raise ValueError(f"{name}: keys must be strings, got {keys[0]!r} ({type(keys[0]).__name__})")
            units += sum(1 + len(key) for key in item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not (item is None or isinstance(item, (bool, int, float, str))):
            raise ValueError(f"{name} holds a {type(item).__name__} value; it takes JSON values only (null, "
                             "booleans, numbers, strings, lists, mappings with string keys)")


def typed(name: str, value):
    """``value`` read from text as field ``name``'s type: a string that spells a
    number becomes an int or float where the field takes one ('1e-3', which YAML
    1.1 leaves a string, '30' from a flag), 'none' or 'null' becomes None where
    the field allows None and has no option of that name. Anything else comes back as it is, for ``validate`` to
    judge (unknown names too)."""
    kinds = _TYPES.get(name, ())
    if not isinstance(value, str):
        return value
    text = value.strip()
    options = {o.lower(): o for c in _RANGES.get(name, ()) if isinstance(c, StrOptions) for o in c.options}
    if text.lower() in options:  # an option spelled 'none' (pretrain) is that option, in any case, not None
        return options[text.lower()]
    if type(None) in kinds and text.lower() in ("none", "null", "~"):
        return None
    if list in kinds:  # a list from a flag: comma-separated
        return [part.strip() for part in text.split(",") if part.strip()]
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(text)
            except ValueError:
                pass
    return value
