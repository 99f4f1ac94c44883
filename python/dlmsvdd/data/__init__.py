"""The data layer: image sources (``sources``), index protocols (``protocols``:
one-vs-rest, long-tailed pools, stratified splits) and tasks (``tasks``: the
protocols applied to a source, with the transforms a backbone needs).
Imports nothing else of dlmsvdd."""

from . import protocols, sources, tasks

__all__ = ["protocols", "sources", "tasks"]
