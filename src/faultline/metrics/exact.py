"""Exact, mergeable sums of floats and of their squares, for means and standard deviations.

Every finite float64 is an integer multiple of 2**-1126 once written as its 53-bit integer
mantissa times a power of two, and its square a multiple of 2**-2252. :class:`ExactMoments`
keeps Σx and Σx² as Python integers on those two grids, so adding and merging are integer
additions: exact, associative and commutative. A mean or a variance is read off as one
correctly rounded division, identical to the last bit whatever the batching or merge order.

Folding a batch in is vectorised with numpy: each value is split by :func:`numpy.frexp` into
an integer mantissa (in three limbs of at most 18 bits) and an exponent. Exponents are taken
four at a time: the limbs are shifted left by the exponent's offset in its group of four (at
most 3 bits, 6 for the limb products that make up the mantissa's square), then summed per
(group, exponent quartet) as int64 — every term is below 2**43 and at most 2**19 values are
summed before the totals are shifted into the Python integers, so no partial sum can reach
2**63. :class:`MomentTable` keeps those int64 totals across batches, so the per-batch work
has no Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

__all__ = ["ExactMoments", "MomentTable", "group_sums", "grouped_moments"]

_SHIFT = 1126
"""Σx is kept in units of 2**-_SHIFT (the mantissa's 53 bits below the smallest exponent)."""
_LIMB = 18
_MASK = (1 << _LIMB) - 1
_QUARTETS = 1 << 10
"""More than the quartets of biased exponents ``frexp`` can return (0 to 2097 after the bias)."""
_CHUNK = 1 << 19
"""Values summed in int64 at once: sums of this many terms below 2**43 cannot overflow."""


class ExactMoments:
    """The count, Σx and Σx² of some float64 values, exactly.

    Attributes:
        count: How many values.
        total: Σx in units of 2**-1126, exactly.
        squares: Σx² in units of 2**-2252, exactly.
    """

    __slots__ = ("count", "squares", "total")

    def __init__(self, count: int = 0, total: int = 0, squares: int = 0) -> None:
        self.count = count
        self.total = total
        self.squares = squares

    @classmethod
    def of(cls, values: NDArray[np.float64] | Sequence[float]) -> ExactMoments:
        """The moments of ``values``.

        Raises:
            ValueError: A value is not finite.
        """
        return cls().add(values)

    def add(self, values: NDArray[np.float64] | Sequence[float]) -> ExactMoments:
        """Fold ``values`` in; returns ``self``.

        Raises:
            ValueError: A value is not finite.
        """
        arr = np.asarray(values, dtype=np.float64).ravel()
        part = grouped_moments(arr, np.zeros(arr.size, dtype=np.int64)).get(0)
        return self if part is None else self.merge(part)

    def merge(self, other: ExactMoments) -> ExactMoments:
        """Add the moments of other values to these; returns ``self``."""
        self.count += other.count
        self.total += other.total
        self.squares += other.squares
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExactMoments):
            return NotImplemented
        return (self.count, self.total, self.squares) == (other.count, other.total, other.squares)

    def __hash__(self) -> int:
        return hash((self.count, self.total, self.squares))

    def __repr__(self) -> str:
        return f"ExactMoments(count={self.count}, sum={float(self.sum)!r})"

    def __getstate__(self) -> tuple[int, int, int]:
        return self.count, self.total, self.squares

    def __setstate__(self, state: tuple[int, int, int]) -> None:
        self.count, self.total, self.squares = state

    @property
    def sum(self) -> Fraction:
        """Σx, exactly."""
        return Fraction(self.total, 1 << _SHIFT)

    @property
    def sum_of_squares(self) -> Fraction:
        """Σx², exactly."""
        return Fraction(self.squares, 1 << (2 * _SHIFT))

    def mean(self) -> float | None:
        """Σx / n, correctly rounded; ``None`` for no values."""
        if not self.count:
            return None
        return self.total / (self.count << _SHIFT)

    def variance(self) -> float | None:
        """The population variance (Σx² − (Σx)²/n) / n, correctly rounded; ``None`` for none.

        ``inf`` when it is beyond the largest float (only for values near the float range's
        ends); :meth:`pstdev` is still finite then.
        """
        if not self.count:
            return None
        numerator, denominator = self._variance_fraction()
        try:
            return numerator / denominator
        except OverflowError:
            return math.inf

    def pstdev(self) -> float | None:
        """The population standard deviation, ``sqrt`` of the correctly rounded variance."""
        if not self.count:
            return None
        numerator, denominator = self._variance_fraction()
        try:
            return math.sqrt(numerator / denominator)
        except OverflowError:  # scale by an even power of two, exactly, to stay in range
            half = (numerator.bit_length() - denominator.bit_length()) // 2
            return math.sqrt(numerator / (denominator << (2 * half))) * 2.0**half

    def _variance_fraction(self) -> tuple[int, int]:
        """The variance as an exact ``(numerator, denominator)``; the numerator is never < 0."""
        numerator = self.count * self.squares - self.total * self.total
        return numerator, (self.count * self.count) << (2 * _SHIFT)


class MomentTable:
    """Exact moments per integer group, folded in batch after batch without a Python loop.

    Each batch's limbs are summed per (group, exponent quartet) into an int64 table (nine
    columns: the count, Σx's three limbs and Σx²'s five); the table is turned into
    :class:`ExactMoments` only when :data:`_CHUNK` more values could overflow it, and when
    read. Groups are non-negative integers below 2**50.
    """

    def __init__(self) -> None:
        self.flushed: dict[int, ExactMoments] = {}
        self.keys = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros((9, 0), dtype=np.int64)
        self.pending = 0

    def add(self, values: NDArray[np.float64], groups: NDArray[np.int64]) -> None:
        """Fold in ``values``, each in the group ``groups`` gives it.

        Raises:
            ValueError: A value is not finite.
        """
        if not np.isfinite(values).all():
            bad = values[~np.isfinite(values)][0]
            raise ValueError(f"exact sums need finite values, got {bad}; drop or fix it first")
        for start in range(0, values.size, _CHUNK):
            part = values[start : start + _CHUNK]
            keys, sums = _limb_sums(part, groups[start : start + _CHUNK])
            self._fold(keys, sums, part.size)

    def merge(
        self,
        other: MomentTable,
        recode: Callable[[NDArray[np.int64]], NDArray[np.int64]] | None = None,
    ) -> None:
        """Fold in another table, its groups mapped by ``recode`` (default: unchanged)."""
        mapped = recode or (lambda groups: groups)
        keys = other.keys
        if keys.size:
            keys = mapped(keys // _QUARTETS) * _QUARTETS + keys % _QUARTETS
        self._fold(keys, other.sums, other.pending)
        if other.flushed:
            groups = mapped(np.asarray(list(other.flushed), dtype=np.int64)).tolist()
            for group, found in zip(groups, other.flushed.values(), strict=True):
                self._moments(group).merge(found)

    def totals(self) -> dict[int, ExactMoments]:
        """Group to its moments (the table is flushed first)."""
        self._flush()
        return self.flushed

    def _moments(self, group: int) -> ExactMoments:
        found = self.flushed.get(group)
        if found is None:
            found = self.flushed[group] = ExactMoments()
        return found

    def _fold(self, keys: NDArray[np.int64], sums: NDArray[np.int64], values: int) -> None:
        if self.pending + values > _CHUNK:
            self._flush()
        self.keys, self.sums = group_sums(
            np.concatenate((self.keys, keys)), np.concatenate((self.sums, sums), axis=1)
        )
        self.pending += values

    def _flush(self) -> None:
        """Shift the table's per-quartet sums into the exact Python integers; empty it."""
        for k, row in zip(self.keys.tolist(), self.sums.T.tolist(), strict=True):
            group, quartet = divmod(k, _QUARTETS)
            e = quartet << 2
            n, s0, s1, s2, q4, q3, q2, q1, q0 = row
            found = self._moments(group)
            found.count += n
            found.total += ((s0 << 36) + (s1 << 18) + s2) << e
            found.squares += ((q4 << 72) + (q3 << 54) + (q2 << 36) + (q1 << 18) + q0) << (2 * e)
        self.keys = self.keys[:0]
        self.sums = self.sums[:, :0]
        self.pending = 0


def grouped_moments(
    values: NDArray[np.float64], groups: NDArray[np.int64]
) -> dict[int, ExactMoments]:
    """The exact moments of ``values`` per group.

    Args:
        values: The numbers.
        groups: Each number's group, a non-negative integer below 2**50.

    Returns:
        Group to moments, for the groups present.

    Raises:
        ValueError: A value is not finite.
    """
    table = MomentTable()
    table.add(values, groups)
    return table.totals()


def group_sums(
    keys: NDArray[np.int64], columns: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Integer sums of ``columns`` (shape ``(c, n)``) per key, without floats.

    Args:
        keys: Each column entry's key (``n`` of them).
        columns: The numbers to sum, one row per quantity; their sums must fit in int64.

    Returns:
        ``(unique_keys, sums)``: the keys present, ascending, and the ``(c, k)`` sums.
    """
    order = np.argsort(keys)
    ordered = keys[order]
    starts = _run_starts(ordered)
    if not starts.size:
        return ordered, columns[:, :0]
    return ordered[starts], np.add.reduceat(columns[:, order], starts, axis=1)


def _run_starts(ordered: NDArray[np.int64]) -> NDArray[np.intp]:
    """Where each run of equal keys starts in a sorted array."""
    if not ordered.size:
        return np.zeros(0, dtype=np.intp)
    return np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))


def _limb_sums(
    values: NDArray[np.float64], groups: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per (group, exponent quartet) key: the count and the limb sums of at most _CHUNK values."""
    mant, exp = np.frexp(values)
    biased = exp.astype(np.int64) + (_SHIFT - 53)  # value = mantissa·2^53 · 2^(biased - 1126)
    key = groups.astype(np.int64) * _QUARTETS + (biased >> 2)
    order = np.argsort(key)  # sort the inputs, not the nine columns made from them
    key, biased = key[order], biased[order]
    offset = biased & 3
    signed = (mant[order] * 2.0**53).astype(np.int64)  # exact: |mant| < 1 has 53 bits
    m = np.abs(signed)
    a, b, c = m >> (2 * _LIMB), (m >> _LIMB) & _MASK, m & _MASK
    # m = a·2^36 + b·2^18 + c, so m² = a²·2^72 + 2ab·2^54 + (2ac + b²)·2^36 + 2bc·2^18 + c²:
    # every limb is below 2^18 and every product term below 2^37, before the offset's shift.
    cols = np.empty((9, m.size), dtype=np.int64)
    cols[0] = 1
    cols[1], cols[2], cols[3] = a, b, c
    np.multiply(a, a, out=cols[4])
    np.multiply(a, b, out=cols[5])
    np.multiply(a, c, out=cols[6])
    np.multiply(b, c, out=cols[7])
    np.multiply(c, c, out=cols[8])
    cols[5:8] <<= 1
    cols[6] += b * b
    cols[1:4] <<= offset
    cols[4:] <<= 2 * offset
    if (signed < 0).any():
        cols[1:4] *= np.sign(signed)
    starts = _run_starts(key)
    if not starts.size:
        return key, cols
    return key[starts], np.add.reduceat(cols, starts, axis=1)
