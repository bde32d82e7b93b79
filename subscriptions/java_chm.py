"""Key iteration order of ``java.util.concurrent.ConcurrentHashMap<String, V>`` (JDK 17).

Kafka's ``ClientMetricsManager`` keeps subscriptions in a ``ConcurrentHashMap`` keyed by
name and merges them in ``subscriptionMap.values()`` order; when two subscriptions'
metric names land in the same bucket of the merged HashSet, that order decides the
element order and therefore the subscription id. This models
``java/util/concurrent/ConcurrentHashMap.java`` (OpenJDK 17) for a single writer:

* ``spread(h) = (h ^ (h >>> 16)) & 0x7fffffff``; bin = ``spread & (n-1)``.
* The table is created at 16 on first insert with ``sizeCtl`` 12; unlike HashMap it
  grows as soon as the count *reaches* ``sizeCtl`` (``addCount``: ``s >= sizeCtl``):
  the 12th key makes it 32, the 24th 64.
* ``transfer`` splits a list bin differently from HashMap: the trailing run of nodes
  going to the same half (``lastRun``) is reused as is, and every node before it is
  *prepended* to its half, so those nodes come out reversed.
* A bin reaching 9 nodes calls ``treeifyBin``: below 64 buckets that is
  ``tryPresize(n << 1)``, which keeps doubling until ``sizeCtl >= tableSizeFor(1.5 *
  2n + 1)`` (16 -> 128, 32 -> 256); from 64 on the bin becomes a ``TreeBin`` whose
  iteration list (``first``) keeps order, and later inserts are *prepended* to it.

Only insertion is modelled (``put`` of a new key; replacing a value keeps the position).
"""

from __future__ import annotations

from collections.abc import Iterable

from subscriptions.java_hashset import table_size_for
from subscriptions.java_lang import string_hash_code

__all__ = ["ConcurrentHashMapOrder", "chm_spread"]

_DEFAULT_CAPACITY = 16
_MAXIMUM_CAPACITY = 1 << 30
_TREEIFY_THRESHOLD = 8
_UNTREEIFY_THRESHOLD = 6
_MIN_TREEIFY_CAPACITY = 64
_HASH_BITS = 0x7FFFFFFF


def chm_spread(key: str) -> int:
    """``ConcurrentHashMap.spread(key.hashCode())``: non-negative 31-bit hash."""
    h = string_hash_code(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & _HASH_BITS


class _Bin:
    """A bin: its nodes in iteration order, and whether it is a ``TreeBin``."""

    __slots__ = ("nodes", "tree")

    def __init__(self, nodes: list[tuple[int, str]], tree: bool = False) -> None:
        self.nodes = nodes
        self.tree = tree


class ConcurrentHashMapOrder:
    """Iteration order of the keys of a ``new ConcurrentHashMap<>()`` after ``put``s."""

    __slots__ = ("_count", "_size_ctl", "_table")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._table: list[_Bin | None] | None = None
        self._count = 0
        self._size_ctl = 0
        for key in keys:
            self.put(key)

    @property
    def capacity(self) -> int:
        return 0 if self._table is None else len(self._table)

    def keys(self) -> list[str]:
        """Keys in ``keySet()`` / ``values()`` traversal order (bins by index)."""
        return [
            key
            for bin_ in self._table or ()
            if bin_ is not None
            for _, key in bin_.nodes
        ]

    def put(self, key: str) -> None:
        hash_ = chm_spread(key)
        if self._table is None:
            self._table = [None] * _DEFAULT_CAPACITY
            self._size_ctl = _DEFAULT_CAPACITY - (_DEFAULT_CAPACITY >> 2)
        table = self._table
        index = (len(table) - 1) & hash_
        bin_ = table[index]
        if bin_ is None:
            table[index] = _Bin([(hash_, key)])
            self._add_count()
            return
        if bin_.tree:
            if any(k == key for _, k in bin_.nodes):
                return
            bin_.nodes.insert(0, (hash_, key))  # TreeBin.putTreeVal: first = new node
            self._add_count()
            return
        # putVal's binCount: position (1-based) of the match, or of the last node when
        # appending after it.
        for position, (h, k) in enumerate(bin_.nodes, start=1):
            if h == hash_ and k == key:
                if position >= _TREEIFY_THRESHOLD:
                    self._treeify_bin(index)
                return  # replaced in place: no addCount
        bin_count = len(bin_.nodes)
        bin_.nodes.append((hash_, key))
        if bin_count >= _TREEIFY_THRESHOLD:
            self._treeify_bin(index)
        self._add_count()

    def _add_count(self) -> None:
        self._count += 1
        while self._count >= self._size_ctl and self.capacity < _MAXIMUM_CAPACITY:
            self._transfer()

    def _treeify_bin(self, index: int) -> None:
        table = self._table
        assert table is not None
        n = len(table)
        if n < _MIN_TREEIFY_CAPACITY:
            self._try_presize(n << 1)
            return
        bin_ = table[index]
        if bin_ is not None and not bin_.tree:
            bin_.tree = True  # TreeBin(hd): `first` keeps the list order

    def _try_presize(self, size: int) -> None:
        if size >= _MAXIMUM_CAPACITY >> 1:
            target = _MAXIMUM_CAPACITY
        else:
            target = table_size_for(size + (size >> 1) + 1)
        while not (target <= self._size_ctl or self.capacity >= _MAXIMUM_CAPACITY):
            self._transfer()

    def _transfer(self) -> None:
        old = self._table
        assert old is not None
        n = len(old)
        new: list[_Bin | None] = [None] * (n << 1)
        for index, bin_ in enumerate(old):
            if bin_ is None:
                continue
            if bin_.tree:
                lo = [node for node in bin_.nodes if node[0] & n == 0]
                hi = [node for node in bin_.nodes if node[0] & n != 0]
                # untreeify at <= 6 nodes; otherwise a (new or the same) TreeBin
                if lo:
                    new[index] = _Bin(lo, tree=len(lo) > _UNTREEIFY_THRESHOLD)
                if hi:
                    new[index + n] = _Bin(hi, tree=len(hi) > _UNTREEIFY_THRESHOLD)
                continue
            new_lo, new_hi = self._split_list(bin_.nodes, n)
            if new_lo:
                new[index] = _Bin(new_lo)
            if new_hi:
                new[index + n] = _Bin(new_hi)
        self._table = new
        self._size_ctl = (n << 1) - (n >> 1)

    @staticmethod
    def _split_list(
        nodes: list[tuple[int, str]], bit: int
    ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """``transfer`` for a list bin: keep the ``lastRun`` tail, prepend the others.

        Worked example, bit 16, nodes a(lo) b(hi) c(lo) d(lo): lastRun = c (c, d share
        the lo half through the end). lo starts as [c, d]; walking a, b before lastRun:
        a is prepended to lo -> [a, c, d], b to hi -> [b]. With nodes a(lo) b(lo) c(hi):
        lastRun = c; lo = prepend a then b -> [b, a]: the earlier nodes are reversed.
        """
        run_bit = nodes[0][0] & bit
        last_run = 0
        for position in range(1, len(nodes)):
            this_bit = nodes[position][0] & bit
            if this_bit != run_bit:
                run_bit = this_bit
                last_run = position
        tail = list(nodes[last_run:])
        lo: list[tuple[int, str]] = tail if run_bit == 0 else []
        hi: list[tuple[int, str]] = tail if run_bit != 0 else []
        for node in nodes[:last_run]:
            if node[0] & bit == 0:
                lo.insert(0, node)
            else:
                hi.insert(0, node)
        return lo, hi
