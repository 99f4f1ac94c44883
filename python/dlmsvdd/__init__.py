"""dlmsvdd: Deep Large-Margin lp-SVDD.

The training driver is built on the compiled kernels of ``dlmsvdd_ext``.
"""

__version__ = "0.1.0"
