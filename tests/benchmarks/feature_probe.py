"""Where a labelled task's AUROC is lost: in the boundary DLM-SVDD fits, or in the network's features.

For each class of the paper's labelled protocol (``paper_protocol``'s tasks), DLM-SVDD is fitted at its
defaults; then, on its final network's features of the training and validation rows (eval mode, no
augmentation), validation AUROC of:

* the model's own score (its boundary);
* the boundary re-solved on the same features and labels at the bandwidth times each of
  ``--gamma-multiples`` (the model's bandwidth is estimated once from the starting features);
* a logistic regression on the standardised features (scikit-learn, C = 1 and 0.01): a linear read-out
  of the same features, as the supervised classifier peer makes of its own;
* the mean distance to the 5 nearest training normals in feature space;
* with Deep SAD's term in the joint epochs (``deep_sad_weight``), the squared distance to that term's
  centre (Deep SAD's own score, on DLM-SVDD's features), and the blend of the two scores the network
  was trained for: the boundary's dissimilarity and that distance, each standardised by its mean and
  standard deviation over the training normals, summed.

With ``--peer classifier`` (or ``deep_sad``) the peer of ``image_peers`` is trained on the same task as
``paper_protocol`` trains it, and DLM-SVDD's boundary (its ``nu``, slack penalties and kernel, the
bandwidth estimated afresh by its median rule) is solved on the peer's trained features: the
boundary on the other network's features, beside that network's own score.

Validation only: the test split is not read. One JSON line a class. A boundary far below the linear
read-out on the same features says the features hold what the score does not use; the two close
together, the representation is what is short.
``python tests/benchmarks/feature_probe.py --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_peers import outputs, train_peer  # noqa: E402
from paper_protocol import config_for, load_source  # noqa: E402

from dlmsvdd import DLMSVDD, tasks  # noqa: E402
from dlmsvdd.training import deep_sad  # noqa: E402

K_NEIGHBOURS = 5


def refit_boundary(model: DLMSVDD, feats: torch.Tensor, targets, gamma):
    """The model's boundary (its nu, slack penalties and kernel) solved afresh on these features and
    labels at bandwidth ``gamma`` (a number, or "median": estimated on them by the median rule)."""
    return clone(model.svdd_).set_params(gamma=gamma, warm_start=False).fit(feats, targets)


def boundary_auroc(boundary, val_feats: torch.Tensor, val_t) -> float:
    """Validation AUROC of a boundary's dissimilarity (anomalies the positive class)."""
    return roc_auc_score(val_t < 0, np.asarray(boundary.dissimilarity(val_feats)))


def fit_keeping_anchor(config, task) -> tuple[DLMSVDD, deep_sad.Anchor | None]:
    """DLM-SVDD fitted on the task, and the reference its joint epochs fixed for Deep SAD's term (None
    without the term): the fit keeps it to itself, so its one maker is watched for the fit's length."""
    made, make = [], deep_sad.anchor

    def watched(*args, **kwargs):
        made.append(make(*args, **kwargs))
        return made[-1]

    deep_sad.anchor = watched
    try:
        model = DLMSVDD(config).fit(task.train, task.val)
    finally:
        deep_sad.anchor = make
    return model, (made[0] if made else None)


def centre_read_outs(model: DLMSVDD, reference: deep_sad.Anchor, train_feats, train_t, val_feats, val_t) -> dict:
    """Validation AUROC of the distance to Deep SAD's centre and of its blend with the boundary."""
    anomalous, normal = (val_t < 0).astype(int), train_t > 0
    centre = reference.centre.double().cpu()
    train_d, val_d = deep_sad.distance(train_feats, centre).numpy(), deep_sad.distance(val_feats, centre).numpy()
    train_f = np.asarray(model.svdd_.dissimilarity(train_feats))
    val_f = np.asarray(model.svdd_.dissimilarity(val_feats))

    def standardised(values, reference_values):
        return (values - reference_values.mean()) / max(float(reference_values.std()), 1e-12)

    blend = standardised(val_f, train_f[normal]) + standardised(val_d, train_d[normal])
    return {"boundary": roc_auc_score(anomalous, val_f), "centre_distance": roc_auc_score(anomalous, val_d),
            "blend": roc_auc_score(anomalous, blend)}


def probe(model: DLMSVDD, task, gamma_multiples, reference: deep_sad.Anchor | None = None) -> dict:
    """Validation AUROC of the model's score and of the other read-outs of its final features."""
    train_feats, train_t = model._features(task.train)
    val_feats, val_t = model._features(task.val)
    train_feats, val_feats = train_feats.double().cpu(), val_feats.double().cpu()
    anomalous = (val_t < 0).astype(int)  # higher score: more anomalous
    row = {"model": roc_auc_score(anomalous, model.scores(task.val)[0]), "gamma": float(model.svdd_.gamma_)}
    for k in gamma_multiples:
        boundary = refit_boundary(model, train_feats, train_t, row["gamma"] * k)
        row[f"boundary_gamma_x{k:g}"] = boundary_auroc(boundary, val_feats, val_t)
    scaler = StandardScaler().fit(train_feats.numpy())
    train_x, val_x = scaler.transform(train_feats.numpy()), scaler.transform(val_feats.numpy())
    for c in (1.0, 0.01):
        read_out = LogisticRegression(C=c, max_iter=5000).fit(train_x, train_t < 0)
        row[f"logistic_C{c:g}"] = roc_auc_score(anomalous, read_out.decision_function(val_x))
    distances = torch.cdist(val_feats, train_feats[torch.as_tensor(train_t > 0)])
    row["knn_normals"] = roc_auc_score(anomalous, distances.topk(K_NEIGHBOURS, largest=False).values.mean(1).numpy())
    if reference is not None:
        row.update(centre_read_outs(model, reference, train_feats, train_t, val_feats, val_t))
    return row


def probe_peer(model: DLMSVDD, task, config, kind: str) -> dict:
    """Validation AUROC of a peer's own score and of DLM-SVDD's boundary on the peer's trained features."""
    net, _, record = train_peer(kind, task, config, model.device)
    backbone = net[0]  # the features its head reads
    train_feats, train_t = outputs(backbone, task.train, config.batch_size, model.device)
    val_feats, val_t = outputs(backbone, task.val, config.batch_size, model.device)
    train_feats, val_feats = train_feats.double().cpu(), val_feats.double().cpu()
    on_peer = boundary_auroc(refit_boundary(model, train_feats, train_t, "median"), val_feats, val_t)
    return {kind: record["val_auroc"], f"{kind}_seconds": record["seconds"], f"boundary_on_{kind}_features": on_peer}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="cifar10", help="cifar10, fashion_mnist or digits")
    parser.add_argument("--root", default=None, help="where the fetch script wrote the images")
    parser.add_argument("--ratio", type=float, default=0.1, help="labelled anomalies per normal row")
    parser.add_argument("--classes", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gamma-multiples", type=float, nargs="+", default=[0.25, 0.5, 1, 2, 4, 8])
    parser.add_argument("--peer", choices=["classifier", "deep_sad"], default=None,
                        help="also train this peer and solve DLM-SVDD's boundary on its features")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--output", type=Path, required=True, help="a JSON line a class is appended here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    source = load_source(args.data, args.root)
    for cls in args.classes:
        task = tasks.make_task(source, cls, ratio=args.ratio, seed=args.seed)
        start = time.perf_counter()
        config = config_for(source, cls, args.seed, {}, ratio=args.ratio)
        model, reference = fit_keeping_anchor(config, task)
        row = {"data": args.data, "class": cls, "ratio": args.ratio, "seed": args.seed,
               "fit_seconds": time.perf_counter() - start, "kept_epoch": model.best_epoch_,
               **probe(model, task, args.gamma_multiples, reference)}
        if args.peer:
            row.update(probe_peer(model, task, config, args.peer))
        with args.output.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
