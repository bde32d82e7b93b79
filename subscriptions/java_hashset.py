"""Iteration order of ``java.util.HashSet<String>`` (a ``java.util.HashMap``), as in JDK 17.

Kafka hashes ``HashSet.toString()`` into the subscription id
(``ClientMetricsManager.computeSubscriptionId``), so the order
in which a HashSet yields its elements is part of the wire contract. This module models
exactly the parts of ``java/util/HashMap.java`` (OpenJDK 17) that decide that order:

* ``hash(key) = h ^ (h >>> 16)`` with ``h = String.hashCode()``; bucket = ``hash & (cap-1)``.
* Capacity starts at 16 (``new HashSet<>()``) or ``tableSizeFor(initialCapacity)``;
  it doubles when ``++size > threshold`` (0.75 x capacity): 13 elements -> 32,
  25 -> 64, 49 -> 128 ...
* A bucket is a list in insertion order; a resize splits each bucket into a "lo" and a
  "hi" list keeping the relative order (``Node`` split in ``resize()``).
* When a bucket reaches 9 entries (``TREEIFY_THRESHOLD`` 8) ``treeifyBin`` doubles the
  table instead if capacity < 64 (``MIN_TREEIFY_CAPACITY``); otherwise the bucket becomes
  a red-black tree (``TreeNode``). A tree bucket is still iterated through its ``next``
  chain, but ``treeify`` and every insertion move the tree's root to the front of that
  chain (``moveRootToFront``) and a new node is linked right after its tree parent
  (``putTreeVal``). So the red-black tree is modelled too, rotation for rotation.

Iteration = buckets in index order, each bucket's chain in order.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Sequence

from subscriptions.java_lang import string_hash_code, to_int32, utf16_code_units

__all__ = ["JavaHashSet", "hashmap_hash", "table_size_for"]

_DEFAULT_INITIAL_CAPACITY = 16
_MAXIMUM_CAPACITY = 1 << 30
_TREEIFY_THRESHOLD = 8
_UNTREEIFY_THRESHOLD = 6
_MIN_TREEIFY_CAPACITY = 64


@functools.lru_cache(maxsize=65536)
def hashmap_hash(key: str) -> int:
    """``HashMap.hash(key)``: ``h ^ (h >>> 16)`` as a signed int32."""
    h = string_hash_code(key) & 0xFFFFFFFF
    return to_int32(h ^ (h >> 16))


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= capacity (at least 1)."""
    if capacity <= 1:
        return 1
    return min(1 << (capacity - 1).bit_length(), _MAXIMUM_CAPACITY)


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _copy_constructor_capacity(size: int, jdk: int) -> int:
    """Initial capacity ``new HashSet<>(collection)`` passes to ``new HashMap<>(n)``.

    JDK 17: ``Math.max((int) (c.size()/.75f) + 1, 16)`` (float arithmetic), e.g. 12 -> 17
    (table 32). JDK 19+: ``HashMap.calculateHashMapCapacity(Math.max(c.size(), 12))`` =
    ``ceil(n / 0.75)``, e.g. 12 -> 16 (table 16).
    """
    if jdk >= 19:
        n = max(size, 12)
        return -(-n * 4 // 3)
    return max(int(_float32(_float32(float(size)) / _float32(0.75))) + 1, 16)


class _TreeNode:
    """``HashMap.TreeNode``: red-black tree links plus the key and its spread hash."""

    __slots__ = ("hash", "key", "left", "parent", "red", "right")

    def __init__(self, hash_: int, key: str) -> None:
        self.hash = hash_
        self.key = key
        self.parent: _TreeNode | None = None
        self.left: _TreeNode | None = None
        self.right: _TreeNode | None = None
        self.red = False


class _TreeBin:
    """A treeified bucket: the red-black tree and the ``next`` chain used for iteration."""

    __slots__ = ("chain", "root")

    def __init__(self, chain: list[_TreeNode]) -> None:
        self.chain = chain
        self.root: _TreeNode | None = None


def _direction(hash_: int, key: str, node: _TreeNode) -> int:
    """Tree comparison of ``putTreeVal``/``treeify``: by hash, then ``String.compareTo``.

    compareTo orders UTF-16 code units (not code points); distinct Strings never compare
    equal, so ``tieBreakOrder`` (identity hash codes) is never reached for String keys.
    """
    if node.hash > hash_:
        return -1
    if node.hash < hash_:
        return 1
    mine, theirs = utf16_code_units(key), utf16_code_units(node.key)
    return -1 if mine < theirs else (1 if mine > theirs else 0)


def _rotate_left(root: _TreeNode | None, p: _TreeNode) -> _TreeNode | None:
    r = p.right
    if r is None:
        return root
    rl = p.right = r.left
    if rl is not None:
        rl.parent = p
    pp = r.parent = p.parent
    if pp is None:
        root = r
        r.red = False
    elif pp.left is p:
        pp.left = r
    else:
        pp.right = r
    r.left = p
    p.parent = r
    return root


def _rotate_right(root: _TreeNode | None, p: _TreeNode) -> _TreeNode | None:
    left = p.left
    if left is None:
        return root
    lr = p.left = left.right
    if lr is not None:
        lr.parent = p
    pp = left.parent = p.parent
    if pp is None:
        root = left
        left.red = False
    elif pp.right is p:
        pp.right = left
    else:
        pp.left = left
    left.right = p
    p.parent = left
    return root


def _balance_insertion(root: _TreeNode | None, x: _TreeNode) -> _TreeNode:
    """``TreeNode.balanceInsertion``, line for line (it decides which node becomes root)."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            assert root is not None
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if xppr is not None and xppr.red:
                xppr.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.right:
                    x = xp
                    root = _rotate_left(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = _rotate_right(root, xpp)
        else:
            if xppl is not None and xppl.red:
                xppl.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.left:
                    x = xp
                    root = _rotate_right(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = _rotate_left(root, xpp)


def _move_root_to_front(tree: _TreeBin) -> None:
    root = tree.root
    if root is not None and tree.chain[0] is not root:
        tree.chain.remove(root)
        tree.chain.insert(0, root)


def _treeify(tree: _TreeBin) -> None:
    """``TreeNode.treeify``: insert the chain's nodes in chain order, then root to front."""
    root: _TreeNode | None = None
    for x in tree.chain:
        x.left = x.right = None
        if root is None:
            x.parent = None
            x.red = False
            root = x
            continue
        p = root
        while True:
            direction = _direction(x.hash, x.key, p)
            xp = p
            child = p.left if direction <= 0 else p.right
            if child is None:
                x.parent = xp
                if direction <= 0:
                    xp.left = x
                else:
                    xp.right = x
                root = _balance_insertion(root, x)
                break
            p = child
    tree.root = root
    _move_root_to_front(tree)


def _put_tree_val(tree: _TreeBin, hash_: int, key: str) -> bool:
    """``TreeNode.putTreeVal``; returns False if the key was already present."""
    assert tree.root is not None
    p = tree.root
    while True:
        if p.hash == hash_ and p.key == key:
            return False
        direction = _direction(hash_, key, p)
        xp = p
        child = p.left if direction <= 0 else p.right
        if child is None:
            x = _TreeNode(hash_, key)
            if direction <= 0:
                xp.left = x
            else:
                xp.right = x
            # linked into the chain right after its tree parent
            tree.chain.insert(tree.chain.index(xp) + 1, x)
            x.parent = xp
            tree.root = _balance_insertion(tree.root, x)
            _move_root_to_front(tree)
            return True
        p = child


_Bin = list[tuple[int, str]] | _TreeBin


class JavaHashSet:
    """A ``java.util.HashSet<String>`` that iterates in the JDK's order.

    ``JavaHashSet()`` is ``new HashSet<>()``; ``JavaHashSet.copy_of(items)`` is
    ``new HashSet<>(collection)``. Only insertion is modelled (Kafka never removes from
    these sets except ``clear()``, which keeps the capacity).
    """

    __slots__ = ("_members", "_size", "_table", "_threshold")

    def __init__(self, initial_capacity: int | None = None) -> None:
        self._table: list[_Bin | None] | None = None
        self._size = 0
        self._members: set[str] = set()  # membership only; order lives in the table
        # HashMap(): threshold 0 -> first resize makes 16/12.
        # HashMap(n): threshold holds tableSizeFor(n) until the table is allocated.
        self._threshold = (
            0 if initial_capacity is None else table_size_for(initial_capacity)
        )

    @classmethod
    def copy_of(cls, items: Sequence[str], jdk: int = 17) -> JavaHashSet:
        """``new HashSet<>(items)`` (capacity sized as the given JDK does), then addAll."""
        hash_set = cls(_copy_constructor_capacity(len(items), jdk))
        hash_set.add_all(items)
        return hash_set

    @property
    def capacity(self) -> int:
        return 0 if self._table is None else len(self._table)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __iter__(self) -> Iterator[str]:
        for bucket in self._table or ():
            if bucket is None:
                continue
            if isinstance(bucket, _TreeBin):
                yield from (node.key for node in bucket.chain)
            else:
                yield from (key for _, key in bucket)

    def add_all(self, items: Iterable[str]) -> None:
        """``AbstractCollection.addAll``: ``add`` each element in the source's order."""
        for item in items:
            self.add(item)

    def clear(self) -> None:
        """``HashMap.clear``: empties every bucket, keeps the table (and its capacity)."""
        if self._table is not None:
            self._table = [None] * len(self._table)
        self._size = 0
        self._members.clear()

    def add(self, key: str) -> bool:
        """``HashMap.putVal(hash(key), key, PRESENT, false, true)``; False if present."""
        if key in self._members:
            return False
        self._members.add(key)
        hash_ = hashmap_hash(key)
        if self._table is None or not self._table:
            self._resize()
        table = self._table
        assert table is not None
        index = (len(table) - 1) & hash_
        bucket = table[index]
        if bucket is None:
            table[index] = [(hash_, key)]
        elif isinstance(bucket, _TreeBin):
            _put_tree_val(bucket, hash_, key)
        else:
            bucket.append((hash_, key))
            # binCount >= TREEIFY_THRESHOLD - 1 after appending the (k+1)-th node, k >= 8
            if len(bucket) > _TREEIFY_THRESHOLD:
                self._treeify_bin(hash_)
        self._size += 1
        if self._size > self._threshold:
            self._resize()
        return True

    def to_java_string(self) -> str:
        """``AbstractCollection.toString()``: ``[a, b, c]``, ``[]`` when empty."""
        return "[" + ", ".join(self) + "]"

    def _treeify_bin(self, hash_: int) -> None:
        table = self._table
        assert table is not None
        if len(table) < _MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        index = (len(table) - 1) & hash_
        bucket = table[index]
        if bucket is None or isinstance(bucket, _TreeBin):
            return
        tree = _TreeBin([_TreeNode(h, k) for h, k in bucket])
        _treeify(tree)
        table[index] = tree

    def _resize(self) -> None:
        old_table = self._table
        old_cap = 0 if old_table is None else len(old_table)
        old_thr = self._threshold
        new_thr = 0
        if old_cap > 0:
            if old_cap >= _MAXIMUM_CAPACITY:
                self._threshold = 2**31 - 1
                return
            new_cap = old_cap << 1
            if new_cap < _MAXIMUM_CAPACITY and old_cap >= _DEFAULT_INITIAL_CAPACITY:
                new_thr = old_thr << 1
        elif old_thr > 0:
            new_cap = old_thr
        else:
            new_cap = _DEFAULT_INITIAL_CAPACITY
            new_thr = 12
        if new_thr == 0:
            new_thr = int(_float32(new_cap * 0.75))
        self._threshold = new_thr
        new_table: list[_Bin | None] = [None] * new_cap
        self._table = new_table
        if old_table is None:
            return
        for index, bucket in enumerate(old_table):
            if bucket is None:
                continue
            if isinstance(bucket, _TreeBin):
                self._split_tree(bucket, new_table, index, old_cap)
                continue
            lo = [entry for entry in bucket if entry[0] & old_cap == 0]
            hi = [entry for entry in bucket if entry[0] & old_cap != 0]
            if lo:
                new_table[index] = lo
            if hi:
                new_table[index + old_cap] = hi

    @staticmethod
    def _split_tree(
        tree: _TreeBin, table: list[_Bin | None], index: int, bit: int
    ) -> None:
        """``TreeNode.split``: order-preserving lo/hi split; small halves become lists."""
        lo = [node for node in tree.chain if node.hash & bit == 0]
        hi = [node for node in tree.chain if node.hash & bit != 0]
        for half, position, other in ((lo, index, hi), (hi, index + bit, lo)):
            if not half:
                continue
            if len(half) <= _UNTREEIFY_THRESHOLD:
                table[position] = [(node.hash, node.key) for node in half]
            elif not other:
                table[position] = (
                    tree  # everything stayed together: same tree, same root
                )
            else:
                subtree = _TreeBin(half)
                _treeify(subtree)
                table[position] = subtree
