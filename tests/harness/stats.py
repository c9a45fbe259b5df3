"""Summaries of measured numbers (latencies in the hostile suite, rows of the
benchmarks)."""


def percentile(values, p):
    """The p-th percentile (nearest rank on the sorted values); nan when empty."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]
