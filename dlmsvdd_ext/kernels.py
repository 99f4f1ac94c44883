"""Kernel backends: the exact RBF kernel and seven approximations behind one interface.

Each backend is built by :func:`make` and used in scikit-learn's transformer style:

* ``fit(X)`` learns what the approximation needs from the training features;
* ``fit_transform(X)`` returns the factor ``Z`` (n x m) with ``K ~ Z Z^T``
  (the exact backend returns its kernel operator instead);
* ``transform(x)`` maps new points to the same feature space with torch
  operations, differentiable in ``x`` (the omega-step back-propagates through
  it), and equal to ``Z`` on the training points;
* ``operator(cache_size_mb)`` gives the solver its kernel operator.

The spectral backends (RFF, QMC-RFF, ORF, SORF, Fastfood) share the cosine map
``z(x) = sqrt(2/m) cos(Omega x + b)`` and differ in how the frequencies
``Omega`` are drawn; SORF and Fastfood apply ``Omega`` through the compiled
fast Walsh-Hadamard transform in O(m log d) per point, fused with the cosine
into one compiled pass when no gradient is needed. Nystrom and RPCholesky
are data-dependent: a float64 core, negligible directions cut, so adding
landmarks never makes them worse.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from scipy.special import ndtri
from scipy.stats import qmc

from . import ops
from .placement import move_tensors
from .kernel_operator import KernelOperator, LowRankKernel, exact_rbf_operator
from .validation import check_features, check_gamma

BACKENDS = ("exact", "nystrom", "rff", "qmc_rff", "orf", "sorf", "fastfood", "rpcholesky")


# ---- differentiable building blocks on the compiled kernels

class _RbfKernel(torch.autograd.Function):
    """K(x, Y) by the compiled Gram kernel; gradient in x only (Y is data):
    dK_ij/dx_i = -2 gamma K_ij (x_i - y_j)."""

    @staticmethod
    def forward(ctx, x, Y, gamma):
        K = ops.rbf_gram(x.detach().contiguous(), Y, gamma)
        ctx.save_for_backward(x, Y, K)
        ctx.gamma = gamma
        return K

    @staticmethod
    def backward(ctx, grad):
        x, Y, K = ctx.saved_tensors
        GK = grad * K
        gx = -2.0 * ctx.gamma * (x * GK.sum(1, keepdim=True) - GK @ Y)
        return gx, None, None


def rbf_kernel(x: torch.Tensor, Y: torch.Tensor, gamma: float) -> torch.Tensor:
    """K(x, Y), differentiable in x."""
    return _RbfKernel.apply(x, Y, float(gamma))


class _Fwht(torch.autograd.Function):
    """The normalised Walsh-Hadamard transform over the last dimension; it is
    symmetric and orthogonal, so its backward is itself."""

    @staticmethod
    def forward(ctx, x):
        return _fwht_rows(x)

    @staticmethod
    def backward(ctx, grad):
        return _fwht_rows(grad)


def _fwht_rows(x: torch.Tensor) -> torch.Tensor:
    """ops.fwht over the last dimension of any batch shape."""
    rows = x.detach().reshape(-1, x.shape[-1]).contiguous()
    return ops.fwht(rows, normalized=True).reshape(x.shape)


def fwht(x: torch.Tensor) -> torch.Tensor:
    return _Fwht.apply(x)


def _generator(random_state) -> np.random.Generator:
    return np.random.default_rng(random_state)



# ---- the backends

class KernelBackend:
    """Common interface; see the module docstring."""

    name = ""
    # Whether a score may take k(x, x) = 1, the RBF kernel's own diagonal: the
    # exact kernel, and the landmark maps, whose centre lies in the landmarks'
    # span, so 1 - 2 z(x)^T w + ||w||^2 is phi(x)'s exact RKHS distance to it.
    # A spectral map's z(x)^T z(x) is not 1 (from 0 to 2): its scores are the
    # squared distance in its own feature space, ||z(x) - w||^2.
    unit_diagonal = True

    def __init__(self, gamma: float, n_components: int = 256, random_state=None):
        if int(n_components) < 1:
            raise ValueError(f"n_components must be >= 1, got {n_components}")
        self.gamma = check_gamma(gamma)
        self.n_components = int(n_components)
        self.random_state = random_state

    @staticmethod
    def max_components(n_samples: int) -> int | None:
        """The largest budget m this backend can build from n_samples training
        points (None: no limit; the spectral maps draw m frequencies freely)."""
        return None

    def fit(self, X) -> "KernelBackend":
        raise NotImplementedError

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def fit_transform(self, X):
        return self.fit(X).Z_  # fit computes the training factor once

    FACTOR_ROWS = 16384  # training rows mapped at a time by _training_factor

    def _training_factor(self, X: torch.Tensor) -> torch.Tensor:
        """Z = transform(X) on the training set, ``FACTOR_ROWS`` rows at a time
        into one buffer: the map's own temporaries (the projection, the kernel
        columns) stay small, where on all of X at once they were one or two
        more Z (1-2 GB at N = 1e6, m = 256)."""
        with torch.no_grad():
            first = self.transform(X[:self.FACTOR_ROWS])
            Z = torch.empty((X.shape[0], first.shape[1]), dtype=first.dtype, device=first.device)
            Z[:first.shape[0]] = first
            for i in range(self.FACTOR_ROWS, X.shape[0], self.FACTOR_ROWS):
                Z[i:i + self.FACTOR_ROWS] = self.transform(X[i:i + self.FACTOR_ROWS])
        return Z

    def operator(self, cache_size_mb: float | str = "auto") -> KernelOperator:
        return LowRankKernel(self.Z_)

    def on_rows(self, X) -> "KernelBackend":
        """This fitted map with its training factor on other rows X.

        A copy that shares the map (landmarks or frequencies) and holds ``Z_ =
        transform(X)``. Cross-fitting's fold models take it, so that a fold and the
        whole fit score in one feature space (``dlmsvdd_ext.calibration_scores``).

        Parameters
        ----------
        X : torch.Tensor
            The rows (n, d) to build the factor on.

        Returns
        -------
        KernelBackend
            The copy, fitted.
        """
        other = copy.copy(self)
        other.Z_ = other._training_factor(check_features(X))
        return other

    def release_factor(self) -> None:
        """Forget the training factor ``Z_`` (n x m): scoring needs the map alone, and at
        N = 560,000, m = 256 the factor is 0.57 GB that a fitted model would otherwise hold."""
        self.__dict__.pop("Z_", None)

    def map_rows(self, x: torch.Tensor, reduce) -> torch.Tensor:
        """``reduce(transform(block))`` of ``x`` in blocks of ``FACTOR_ROWS`` rows, concatenated:
        without gradients the map's N x m temporaries stay one block's (issue 35)."""
        if x.requires_grad or x.shape[0] <= self.FACTOR_ROWS:
            return reduce(self.transform(x))
        with torch.no_grad():
            return torch.cat([reduce(self.transform(x[i:i + self.FACTOR_ROWS]))
                              for i in range(0, x.shape[0], self.FACTOR_ROWS)])

    @property
    def is_exact(self) -> bool:
        return False

    # Fitted state without the training data (Z_, X_): what transform needs.
    _TRAINING_DATA = ("Z_", "X_", "pivots_", "landmark_rows_")

    def state_dict(self) -> dict:
        """The parameters and the fitted map (tensors and numbers), enough for
        ``transform``; loads with ``torch.load(weights_only=True)``."""
        fitted = {k: v for k, v in vars(self).items() if k.endswith("_") and k not in self._TRAINING_DATA}
        params = {k: v for k, v in vars(self).items() if not k.endswith("_")}
        return {"name": self.name, "params": params, "fitted": fitted}

    @staticmethod
    def from_state_dict(state: dict, device=None) -> "KernelBackend":
        """The fitted map a ``state_dict`` describes, its tensors on ``device`` (None: as stored)."""
        params = dict(state["params"])
        backend = make(state["name"], params.pop("gamma"), params.pop("n_components"), params.pop("random_state"),
                       **params)
        vars(backend).update(state["fitted"])
        return backend if device is None else backend.to(device)

    def to(self, device) -> "KernelBackend":
        """This backend with every tensor it holds (the map, a training factor) on ``device``."""
        move_tensors(self, device)
        return self


class ExactKernel(KernelBackend):
    name = "exact"

    def fit(self, X):
        self.X_ = check_features(X)
        return self

    def fit_transform(self, X):
        return self.fit(X).operator()

    def on_rows(self, X) -> "ExactKernel":
        """The exact kernel on other rows X (it has no map to share).

        Parameters
        ----------
        X : torch.Tensor
            The rows (n, d).

        Returns
        -------
        ExactKernel
            A new exact kernel, fitted on X.
        """
        return ExactKernel(self.gamma).fit(X)

    def operator(self, cache_size_mb: float | str = "auto"):
        return exact_rbf_operator(self.X_, self.gamma, cache_size_mb)

    def transform(self, x):
        """The kernel vectors k(x) = K(x, X_train) (n_new x n_train)."""
        return rbf_kernel(check_features(x, "x").to(self.X_.dtype), self.X_, self.gamma)

    @property
    def is_exact(self):
        return True


class _LandmarkKernel(KernelBackend):
    """Nystrom-type maps z(x) = K(x, U) M with landmarks U and an m x m map M.
    The landmarks are training points, so m cannot exceed their number."""

    @staticmethod
    def max_components(n_samples: int) -> int | None:
        return n_samples

    def _finish(self, X, landmarks: torch.Tensor, M: torch.Tensor, Z: torch.Tensor | None = None,
                rows: np.ndarray | None = None):
        """Z: the training factor when the caller has it already (RPCholesky's L); ``rows``: the
        landmarks' rows among X (``landmark_rows_``; None: given apart from X, as a shard's are)."""
        self.landmarks_ = landmarks
        self.landmark_rows_ = rows
        self.map_ = M.to(X.dtype)
        self.Z_ = self._training_factor(X) if Z is None else Z
        return self

    def transform(self, x):
        x = check_features(x, "x").to(self.landmarks_.dtype)
        return rbf_kernel(x, self.landmarks_, self.gamma) @ self.map_


class Nystrom(_LandmarkKernel):
    """Uniform landmarks; Z = K(X, U) V L^(-1/2) from W = K(U, U) = V L V^T in
    float64, eigenvalues below rtol * max dropped (the paper's (L + delta I)
    regularisation keeps them, and its accuracy collapses as m grows)."""

    name = "nystrom"

    def __init__(self, gamma, n_components=256, random_state=None, rtol: float = 1e-10):
        super().__init__(gamma, n_components, random_state)
        self.rtol = rtol

    def landmark_indices(self, n: int) -> np.ndarray:
        """The landmarks' rows among n training samples (sorted, seeded)."""
        if self.n_components > n:
            raise ValueError(f"n_components ({self.n_components}) is larger than the number of samples ({n})")
        return np.sort(_generator(self.random_state).choice(n, self.n_components, replace=False))

    def fit(self, X):
        X = check_features(X)
        indices = self.landmark_indices(X.shape[0])
        U = X[torch.as_tensor(indices, device=X.device)].contiguous()
        return self._fit_core(X, U, ops.rbf_gram(U, U, self.gamma), indices)

    def fit_landmarks(self, X, landmarks: torch.Tensor):
        """Fits on X with the given landmark features (a process's shard of the
        training set and landmarks drawn from all of it)."""
        X = check_features(X)
        U = check_features(landmarks, "landmarks").to(X.dtype).contiguous()
        return self._fit_core(X, U, ops.rbf_gram(U, U, self.gamma))

    def _fit_core(self, X, U, W, rows: np.ndarray | None = None):
        """W = K(U, U); the training factor is then mapped in blocks (_training_factor)."""
        w, V = torch.linalg.eigh(W.double())  # the core in float64
        keep = w > self.rtol * w.max()
        self.rank_ = int(keep.sum())
        return self._finish(X, U, V[:, keep] / w[keep].sqrt(), rows=rows)


class RPCholesky(_LandmarkKernel):
    """Randomly pivoted Cholesky (compiled): K ~ L L^T with pivots P sampled in
    proportion to the residual diagonal. New points map like Nystrom on the
    pivots: z(x) = K(x, P) L_P^(-T), L_P = L[P] lower triangular, which gives
    L back on the training points.

    ``block_size`` candidates per round (ops.rpcholesky's accelerated variant,
    whose pivots follow the sequential algorithm's distribution): 32 was the
    fastest of 1-128 at 3000 x 128 and within noise of 64 and 128 at
    6000 x 2048; 10-16x faster than one pivot at a time (6000 x 2048, m = 1024:
    0.14 s against 1.9 s; 3000 x 128, m = 1024: 0.024 s against 0.39 s) at
    the same residual trace. Pivots for a given random_state differ from
    those of block_size=1 (the default until November 2026)."""

    name = "rpcholesky"

    def __init__(self, gamma, n_components=256, random_state=None, block_size: int = 32):
        super().__init__(gamma, n_components, random_state)
        self.block_size = int(block_size)

    def fit(self, X):
        X = check_features(X)
        if self.n_components > X.shape[0]:
            raise ValueError(f"n_components ({self.n_components}) is larger than the number of samples ({X.shape[0]})")
        seed = int(_generator(self.random_state).integers(2**63 - 1))
        L, pivots = ops.rpcholesky(X, self.gamma, self.n_components, seed=seed, block_size=self.block_size)
        self.pivots_ = pivots
        self.rank_ = L.shape[1]
        L_p = L[pivots].double()  # lower triangular in pivot order
        eye = torch.eye(self.rank_, dtype=torch.float64, device=L.device)
        M = torch.linalg.solve_triangular(L_p, eye, upper=False).T  # L_P^(-T)
        # exactly the factor; transform(X) equals it to rounding
        return self._finish(X, X[pivots].contiguous(), M, Z=L, rows=torch.as_tensor(pivots).cpu().numpy())


class _SpectralKernel(KernelBackend):
    """z(x) = sqrt(2/m) cos(Omega x + b); subclasses draw Omega."""

    unit_diagonal = False

    def fit(self, X):
        X = check_features(X)
        self.n_features_in_ = X.shape[1]
        rng = _generator(self.random_state)
        self._draw(rng, X.shape[1])
        self.offset_ = torch.as_tensor(rng.uniform(0, 2 * np.pi, self.n_components), dtype=X.dtype, device=X.device)
        self._to(X)
        self.Z_ = self._training_factor(X)
        return self

    def transform(self, x):
        x = check_features(x, "x").to(self.offset_.dtype)
        if x.shape[1] != self.n_features_in_:
            raise ValueError(f"x has {x.shape[1]} features, the backend was fitted with {self.n_features_in_}")
        return self._map(x)

    def _map(self, x):
        """The features by torch operations (differentiable in x)."""
        return math.sqrt(2.0 / self.n_components) * torch.cos(self._project(x) + self.offset_)

    def frequencies(self) -> torch.Tensor:
        """Omega^T as one dense (d, m) float64 matrix W, so that the map is
        sqrt(2/m) cos(x W + offset_) by a plain matrix product (what an exported
        scorer runs); the structured maps applied to the identity."""
        return self._project(torch.eye(self.n_features_in_, dtype=torch.float64, device=self.offset_.device))


class _DenseSpectral(_SpectralKernel):
    """Frequencies held as a dense m x d matrix."""

    def _to(self, X):
        self.omega_ = torch.as_tensor(self.omega_, dtype=X.dtype, device=X.device)

    def _project(self, x):
        return x @ self.omega_.T

    def frequencies(self):
        return self.omega_.T.double()


class RFF(_DenseSpectral):
    """omega ~ N(0, 2 gamma I), i.i.d."""

    name = "rff"

    def _draw(self, rng, d):
        self.omega_ = rng.standard_normal((self.n_components, d)) * math.sqrt(2 * self.gamma)


class QMCRFF(_DenseSpectral):
    """omega_j = sqrt(2 gamma) PhiInv(u_j) with scrambled Sobol points u_j."""

    name = "qmc_rff"

    def _draw(self, rng, d):
        sobol = qmc.Sobol(d, scramble=True, seed=rng)
        m = self.n_components
        u = sobol.random_base2(int(math.log2(m))) if m & (m - 1) == 0 else sobol.random(m)
        self.omega_ = ndtri(np.clip(u, 1e-12, 1 - 1e-12)) * math.sqrt(2 * self.gamma)


class ORF(_DenseSpectral):
    """Blocks sqrt(2 gamma) S Q: Q random orthogonal, S = diag(s), s_i ~ chi_d."""

    name = "orf"

    def _draw(self, rng, d):
        blocks = []
        for _ in range(math.ceil(self.n_components / d)):
            # QR by torch, not numpy: numpy's BLAS threads keep spinning after
            # the call and took a core from the solve that follows (2x slower).
            Q, R = torch.linalg.qr(torch.from_numpy(rng.standard_normal((d, d))))
            Q = Q * torch.sign(torch.diagonal(R))  # Haar-distributed
            s = torch.from_numpy(np.sqrt(rng.chisquare(d, d)))
            blocks.append(s[:, None] * Q)
        self.omega_ = torch.cat(blocks)[: self.n_components] * math.sqrt(2 * self.gamma)


class _HadamardSpectral(_SpectralKernel):
    """Structured frequencies in blocks of d_p = next power of two >= d, applied by FWHT."""

    def _blocks(self, d):
        self.d_pad_ = 1 << max(1, (d - 1).bit_length())
        return math.ceil(self.n_components / self.d_pad_)

    def _to(self, X):
        for name in self._tensors:
            setattr(self, name, torch.as_tensor(getattr(self, name), dtype=X.dtype, device=X.device))

    def _pad(self, x):
        """x (n, d) -> (n, blocks, d_p): zero-padded, repeated per block."""
        xp = torch.nn.functional.pad(x, (0, self.d_pad_ - x.shape[1]))
        return xp[:, None, :].expand(-1, self.n_blocks_, -1)

    def _finish_projection(self, y):
        return y.reshape(y.shape[0], -1)[:, : self.n_components]

    def _map(self, x):
        """The compiled fused map (ops.sorf_features / fastfood_features) when no
        gradient is wanted (fit, scoring, torch.no_grad); the torch composition,
        which autograd differentiates, when x requires one, and on CUDA for
        d_p above the fused kernel's limit."""
        if (x.requires_grad and torch.is_grad_enabled()) or (
                x.is_cuda and self.d_pad_ > ops.CUDA_FEATURE_MAP_MAX_PAD):
            return super()._map(x)
        return self._fused(x.detach().contiguous())


class SORF(_HadamardSpectral):
    """Omega = sqrt(2 gamma d_p) H D1 H D2 H D3 per block (normalised H, random sign diagonals)."""

    name = "sorf"
    _tensors = ("signs_",)

    def _draw(self, rng, d):
        self.n_blocks_ = self._blocks(d)
        self.signs_ = rng.choice([-1.0, 1.0], size=(3, self.n_blocks_, self.d_pad_))

    def _project(self, x):
        y = self._pad(x)
        for k in (2, 1, 0):  # D3 first
            y = fwht(y * self.signs_[k])
        return self._finish_projection(y * math.sqrt(2 * self.gamma * self.d_pad_))

    def _fused(self, x):
        # Unnormalised transforms: the three 1/sqrt(d_p) go into the scale.
        dp = self.d_pad_
        return ops.sorf_features(x, self.signs_.flip(0), self.offset_, math.sqrt(2 * self.gamma * dp) / dp ** 1.5)


class Fastfood(_HadamardSpectral):
    """Omega = sqrt(2 gamma / d_p) S H G Pi H B per block (Le, Sarlos and Smola
    2013) with unnormalised H: B random signs, Pi a permutation, G Gaussian,
    S_ii = s_i / ||G||_F with s_i ~ chi_{d_p}, so rows have the norms of
    Gaussian rows of N(0, 2 gamma I)."""

    name = "fastfood"
    _tensors = ("signs_", "gauss_", "scale_")

    def _draw(self, rng, d):
        nb, dp = self._blocks(d), self.d_pad_
        self.n_blocks_ = nb
        self.signs_ = rng.choice([-1.0, 1.0], size=(nb, dp))
        self.perm_ = np.stack([rng.permutation(dp) for _ in range(nb)])
        self.gauss_ = rng.standard_normal((nb, dp))
        s = np.sqrt(rng.chisquare(dp, (nb, dp)))
        self.scale_ = s / np.linalg.norm(self.gauss_, axis=1, keepdims=True)

    def _to(self, X):
        super()._to(X)
        self.perm_ = torch.as_tensor(self.perm_, device=X.device)

    def _project(self, x):
        dp = self.d_pad_
        y = fwht(self._pad(x) * self.signs_)  # normalised H B x
        y = torch.gather(y, 2, self.perm_[None].expand(y.shape[0], -1, -1))  # Pi
        y = fwht(y * self.gauss_)  # normalised H G
        # Unnormalised H = sqrt(d_p) * normalised, twice: d_p; times sqrt(2 gamma / d_p).
        return self._finish_projection(y * self.scale_ * math.sqrt(2 * self.gamma * dp))

    def _fused(self, x):
        return ops.fastfood_features(x, self.signs_, self.perm_, self.gauss_, self.scale_, self.offset_,
                                     math.sqrt(2 * self.gamma / self.d_pad_))


_CLASSES = {c.name: c for c in (ExactKernel, Nystrom, RFF, QMCRFF, ORF, SORF, Fastfood, RPCholesky)}


def make(name: str, gamma: float, n_components: int = 256, random_state=None, **options) -> KernelBackend:
    """A kernel backend: the exact RBF kernel or one of its approximations.

    Parameters
    ----------
    name : str
        "exact", "nystrom", "rff", "qmc_rff", "orf", "sorf", "fastfood" or "rpcholesky".
    gamma : float
        The RBF bandwidth.
    n_components : int
        The budget m (unused by the exact kernel).
    random_state : int or None
        Seeds the landmarks or frequencies.
    **options
        The backend's own options, such as RPCholesky's ``block_size`` (32)
        or Nystrom's ``rtol``.

    Returns
    -------
    KernelBackend
        The backend, unfitted: ``fit_transform(X)`` gives the factor Z (n, m)
        with ``K ~ Z Z^T``, ``transform(x)`` maps new points (differentiable).
    """
    if name not in _CLASSES:
        raise ValueError(f"unknown kernel backend {name!r}; choose one of {BACKENDS}")
    return _CLASSES[name](gamma, n_components=n_components, random_state=random_state, **options)


def max_components(name: str, n_samples: int) -> int | None:
    """The largest budget the backend ``name`` can build from n_samples points (None: no limit)."""
    if name not in _CLASSES:
        raise ValueError(f"unknown kernel backend {name!r}; choose one of {BACKENDS}")
    return _CLASSES[name].max_components(n_samples)
