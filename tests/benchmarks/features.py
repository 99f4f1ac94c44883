"""Synthetic features for the solver and kernel benchmarks."""

import torch

def clustered_features(n_normal: int, n_anomaly: int, d: int, n_classes: int = 10, spread: float = 1.0,
                       seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Features that look like L2-normalised CNN features of a one-vs-rest task:
    the normal class around one random centre, anomalies around the other
    classes' centres, isotropic noise of relative size ``spread``. Returns
    (X float32 (n, d), t with +1 normal / -1 anomaly)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(n_classes, d, generator=g), dim=1)
    cls = torch.cat([torch.zeros(n_normal, dtype=torch.long),
                     torch.randint(1, n_classes, (n_anomaly,), generator=g)])
    noise = torch.randn(n_normal + n_anomaly, d, generator=g) * (spread / d ** 0.5)
    X = torch.nn.functional.normalize(centres[cls] + noise, dim=1)
    t = torch.where(cls == 0, 1.0, -1.0)
    return X.float(), t.float()
