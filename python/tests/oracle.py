"""A small pure-numpy oracle of the cluster finder's F64 semantics (docs/semantics.md).

Written from the document alone, operation by operation, with no code shared with cluda:
f64 fill sums, FastPedestal window updates, ``var = max(fma(-m, m, b * inv), 0)`` (the fused
multiply-add evaluated exactly with fractions and rounded once), zero padding, the window sum in
row-major order from ``+0``, ``max > t or total > S * t``, rounding half away from zero, and
frame-synchronous pedestal updates of the quiet pixels. Slow; for small frames only.
"""

from fractions import Fraction

import numpy as np


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to f64 (exact rational arithmetic; int/int division in
    CPython rounds correctly)."""
    out = np.empty(a.shape, dtype=np.float64)
    for i, (x, y, z) in enumerate(zip(a.ravel(), b.ravel(), c.ravel())):
        out.flat[i] = float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
    return out


def _round_half_away(c: np.ndarray) -> np.ndarray:
    a = np.abs(c)
    t = np.trunc(a)
    r = np.where(a - t >= 0.5, t + 1.0, t)
    r = np.minimum(r, float(np.iinfo(np.int32).max))
    return (np.sign(c) * r).astype(np.int32)


class OracleF64:
    """The F64 finder of docs/semantics.md for ``rows x cols`` frames."""

    def __init__(self, rows, cols, size=3, n_sigma=5.0, n=1000, threshold="live"):
        self.rows, self.cols, self.size = rows, cols, size
        self.n_sigma = float(n_sigma)
        self.n = n
        self.threshold = threshold
        self.count = 0
        self.a = np.zeros((rows, cols))
        self.b = np.zeros((rows, cols))
        self.inv = 1.0 / n
        self.frozen = None

    def _std(self):
        m = self.a * self.inv
        var = np.maximum(_fma(-m, m, self.b * self.inv), 0.0)
        return m, np.sqrt(var)

    def _push(self, x, mask):
        x = x.astype(np.float64)
        a = self.a + (x - self.a * self.inv)
        b = self.b + (x * x - self.b * self.inv)
        self.a = np.where(mask, a, self.a)
        self.b = np.where(mask, b, self.b)

    def push_pedestal(self, frames):
        for x in np.asarray(frames).reshape(-1, self.rows, self.cols):
            if self.count < self.n:
                x = x.astype(np.float64)
                self.a = self.a + x
                self.b = self.b + x * x
                self.count += 1
                if self.count == self.n:
                    self.frozen = self._std()[1]
            else:
                self._push(x, np.ones((self.rows, self.cols), dtype=bool))

    def mean(self):
        return self.a * self.inv

    def find(self, frames, first=0):
        """Returns a list of ``(frame, x, y, data)`` tuples in result order."""
        out = []
        s, r = self.size, self.size // 2
        for k, x in enumerate(np.asarray(frames).reshape(-1, self.rows, self.cols)):
            assert self.count >= self.n, "pedestal not ready"
            m, std = self._std()
            if self.threshold == "frozen":
                std = self.frozen
            c = x.astype(np.float64) - m
            t = self.n_sigma * std
            pad = np.zeros((self.rows + 2 * r, self.cols + 2 * r))
            pad[r : r + self.rows, r : r + self.cols] = c
            total = np.zeros((self.rows, self.cols))
            mx = np.full((self.rows, self.cols), -np.inf)
            for dy in range(s):
                for dx in range(s):
                    v = pad[dy : dy + self.rows, dx : dx + self.cols]
                    total = total + v
                    mx = np.maximum(mx, v)
            considered = ~(c < -t)
            hot = (mx > t) | (total > float(s) * t)
            centre = considered & hot & (c == mx)
            quiet = considered & ~hot
            for y, xx in zip(*np.nonzero(centre)):
                window = pad[y : y + s, xx : xx + s]
                out.append((first + k, int(xx), int(y), _round_half_away(window).ravel()))
            self._push(x, quiet)
        return out


def as_tuples(clusters):
    """A result array of cluda as the oracle's tuples."""
    return [
        (int(c["frame"]), int(c["x"]), int(c["y"]), np.asarray(c["data"]))
        for c in clusters
    ]


def assert_same(clusters, expected):
    got = as_tuples(clusters)
    assert len(got) == len(expected), f"{len(got)} clusters, oracle {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g[:3] == e[:3], f"cluster {i}: {g[:3]} != oracle {e[:3]}"
        assert np.array_equal(g[3], e[3]), f"cluster {i} data: {g[3]} != oracle {e[3]}"
