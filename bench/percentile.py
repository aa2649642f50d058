"""percentile.py - the nearest-rank percentile the Python benches report latencies with."""


def rank(sorted_values, q):
    """Nearest-rank percentile q (0..100) of sorted_values (ascending, not empty)."""
    k = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(k) - 1]
