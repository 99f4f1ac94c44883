"""The experiments layer: run folders (``runs``), sweeps and presets, reports
(tables, statistics, plots, the kernel-approximation study) and the kernel
benchmark of ``dlmsvdd bench``. Imports the training and data layers."""
