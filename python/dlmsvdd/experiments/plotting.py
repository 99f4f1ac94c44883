"""matplotlib without a display: every plot of the package goes through here."""


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only; no window is opened)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
