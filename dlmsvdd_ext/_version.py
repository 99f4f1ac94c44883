# The one version number of the project: both packages (dlmsvdd_ext and
# dlmsvdd) and the wheel's metadata (pyproject.toml reads it from here).
__version__ = "0.1.0"
