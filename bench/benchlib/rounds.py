"""Alternated rounds and their medians: every benchmark runs the systems it compares back to
back in each round, so that the host's drift (10-20% from minute to minute on a shared VM)
hits them alike, and reports medians and per-round (paired) ratios."""
from statistics import median

__all__ = ["alternated", "listed", "median", "ratios"]  # median: the scripts take it from here


def alternated(repeats, names, run, swap=False):
    """Calls run(name, round) for every name in each of `repeats` rounds; with swap the
    order reverses every second round (A B, B A, ...), so that no name always goes first.
    Returns {name: [run's result of each round]}."""
    seen = {name: [] for name in names}
    for r in range(repeats):
        for name in names if not swap or r % 2 == 0 else list(reversed(names)):
            seen[name].append(run(name, r))
    return seen


def ratios(tops, bottoms):
    """Each round's ratio top / bottom."""
    return [t / b for t, b in zip(tops, bottoms)]


def listed(values, digits=3):
    return ", ".join(f"{v:.{digits}f}" for v in values)
