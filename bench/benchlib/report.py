"""What the benchmarks write: markdown tables, CSV files and PNG plots."""
import csv
import sys


def table_head(*columns):
    """A markdown table's header line and rule."""
    return "| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|"


def write_csv(path, rows, fieldnames):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fieldnames, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def pyplot():
    """matplotlib's pyplot drawing into files (Agg), or None, said on stderr, when missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): no PNG written", file=sys.stderr)
        return None
    return plt
