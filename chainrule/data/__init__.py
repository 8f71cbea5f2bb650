"""Datasets: the embedded UCI digits and *The Devil's Dictionary* (a character corpus), user
``.npz``/``.csv`` files, a seeded batch iterator, and a sampler that splits a dataset's indices
among data-parallel replicas."""
from __future__ import annotations

import functools
import gzip
import math
import os
import re
from typing import Any, Iterable, Iterator

from chainrule.core._backend import np
from chainrule.core.errors import ChainruleError
from chainrule.core.grad_mode import PROCESS
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor

__all__ = ["CharCorpus", "DataError", "DataLoader", "DistributedSampler", "DEVILS_DICTIONARY_PATH", "DIGITS_PATH",
           "load_arrays", "load_devils_dictionary", "load_digits", "train_test_split"]

_HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS_PATH = os.path.join(_HERE, "digits.npz")
DEVILS_DICTIONARY_PATH = os.path.join(_HERE, "devils_dictionary.txt.gz")


class DataError(ChainruleError, ValueError):
    """A data file that cannot be used: missing keys, ragged rows, non-numeric values, bad labels."""


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The UCI handwritten digits shipped with chainrule: images (1797, 8, 8) uint8 in 0..16, labels.

    Source and licence (CC BY 4.0, Alpaydin & Kaynak): ``chainrule/data/README.txt``.

    >>> import chainrule as cr
    >>> images, labels = cr.data.load_digits()
    >>> images.shape, int(images.max()), labels[:5].tolist()
    ((1797, 8, 8), 16, [0, 1, 2, 3, 4])
    """
    with np.load(DIGITS_PATH, allow_pickle=False) as f:
        return f["images"], f["labels"].astype(np.int64)


def load_arrays(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and integer labels from a user file.

    ``.npz``: arrays ``x`` and ``y`` (or ``images``/``labels``, ``features``/``labels``).
    ``.csv``: numeric rows, the last column is the label; an optional header line is skipped.
    """
    ext = os.path.splitext(path)[1].lower()
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_arrays: no such file {path!r}")
    if ext == ".npz":
        x, y = _from_npz(path)
    elif ext == ".csv":
        x, y = _from_csv(path)
    else:
        raise DataError(f"load_arrays: {path!r} must end in .npz or .csv, got {ext or 'no extension'!r}")
    return x, _labels(y, len(x), path)


def _from_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            for kx, ky in (("x", "y"), ("images", "labels"), ("features", "labels")):
                if kx in f.files and ky in f.files:
                    return f[kx], f[ky]
            keys = list(f.files)
    except (ValueError, OSError) as e:
        raise DataError(f"load_arrays: cannot read {path!r} as .npz ({e})") from None
    raise DataError(f"load_arrays: {path!r} has arrays {keys}; expected 'x' and 'y' (or 'images' "
                    f"and 'labels'): save with numpy.savez(path, x=features, y=labels)")


def _from_csv(path: str) -> tuple[np.ndarray, np.ndarray]:
    with open(path, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    rows = []
    for i, line in enumerate(lines):
        cells = line.split(",")
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            if i == 0:
                continue                      # a header line
            raise DataError(f"load_arrays: {path!r} line {i + 1} has a non-numeric value: {line[:60]!r}") from None
    if not rows:
        raise DataError(f"load_arrays: {path!r} holds no numeric rows")
    widths = {len(r) for r in rows}
    if len(widths) != 1 or min(widths) < 2:
        raise DataError(f"load_arrays: {path!r} has rows of {sorted(widths)} columns; every row needs the "
                        f"same number (>= 2) of columns: features..., label")
    table = np.array(rows)
    return table[:, :-1], table[:, -1]


def _labels(y: np.ndarray, n: int, path: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"load_arrays: {path!r}: labels have shape {y.shape} for {n} examples; need ({n},)")
    if y.dtype.kind == "f" and not np.all(y == np.round(y)) or y.dtype.kind not in "iuf":
        raise DataError(f"load_arrays: {path!r}: labels must be whole class numbers 0..C-1, got dtype "
                        f"{y.dtype} with values like {y[:3].tolist()}")
    y = y.astype(np.int64)
    if y.size and y.min() < 0:
        raise DataError(f"load_arrays: {path!r}: labels must be >= 0, got {y.min()}")
    return y


def train_test_split(x: np.ndarray, y: np.ndarray, test_fraction: float = 0.2,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle with ``seed`` and split into (x_train, y_train, x_test, y_test).

    >>> import chainrule as cr, numpy as np
    >>> xtr, ytr, xte, yte = cr.data.train_test_split(np.arange(10), np.arange(10), 0.3)
    >>> len(xtr), len(xte), sorted(np.concatenate([ytr, yte]).tolist()) == list(range(10))
    (7, 3, True)
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"train_test_split: test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = max(1, int(round(len(x) * test_fraction)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


class DataLoader:
    """Iterate over (x, y) in mini-batches of Tensors, reshuffled each epoch with a seeded generator.

    ``sampler``: any iterable of example indices (a ``DistributedSampler``, a list, ...), iterated
    afresh each epoch; the batches take its indices in its order. As in PyTorch it excludes
    ``shuffle=True`` (a sampler decides the order), and ``len(loader)`` needs ``len(sampler)``.

    >>> import chainrule as cr, numpy as np
    >>> loader = cr.data.DataLoader(np.arange(10.0), np.arange(10), batch_size=4, drop_last=True)
    >>> [xb.shape for xb, yb in loader], len(loader)
    ([(4,), (4,)], 2)
    >>> [yb.data.tolist() for _, yb in cr.data.DataLoader(np.arange(10.0), np.arange(10), batch_size=4,
    ...                                                    sampler=[9, 8, 7, 6, 5])]
    [[9, 8, 7, 6], [5]]
    """

    def __init__(self, x: Any, y: Any, batch_size: int = 32, shuffle: bool = False,
                 drop_last: bool = False, generator: Any = None, sampler: Iterable[int] | None = None) -> None:
        x = x.data if isinstance(x, Tensor) else np.asarray(x)
        y = y.data if isinstance(y, Tensor) else np.asarray(y)
        if len(x) != len(y):
            raise DataError(f"DataLoader: x has {len(x)} examples but y has {len(y)}")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle; the sampler "
                             "decides the order (DistributedSampler(..., shuffle=True) shuffles)")
        self.x, self.y, self.batch_size = x, y, batch_size
        self.shuffle, self.drop_last, self.generator = shuffle, drop_last, generator
        self.sampler = sampler

    def __len__(self) -> int:
        if self.sampler is None:
            n = len(self.x)
        else:
            try:
                n = len(self.sampler)
            except TypeError:
                raise TypeError(f"DataLoader: len() needs a sampler with a length; "
                                f"{type(self.sampler).__name__} has none") from None
        b = self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        n, b = len(self.x), self.batch_size
        if self.sampler is None:
            order = get_generator(self.generator).permutation(n) if self.shuffle else np.arange(n)
        else:
            order = np.fromiter(iter(self.sampler), dtype=np.int64)
        count = len(order) // b if self.drop_last else -(-len(order) // b)
        for i in range(count):
            idx = order[i * b:(i + 1) * b]
            yield Tensor(self.x[idx]), Tensor(self.y[idx])


class DistributedSampler:
    """The indices one data-parallel replica takes of a dataset of ``n`` examples, epoch by epoch:
    ``torch.utils.data.DistributedSampler``'s rule.

    ``dataset_or_n``: an int ``n`` or anything with ``len()``. Each epoch the indices ``range(n)``
    are shuffled (if ``shuffle``) by a NumPy generator seeded with ``seed + epoch`` (so every
    replica, given the same seed, draws the same permutation; PyTorch's own RNG gives a different
    one), then, unless ``drop_last``, padded by wrapping around to the start until they divide
    evenly among the replicas (with ``drop_last`` the tail is dropped instead), and replica
    ``rank`` takes ``indices[rank::num_replicas]``. Together the replicas cover ``range(n)``
    (all but the dropped tail with ``drop_last``); each has ``len(sampler)`` indices. Call
    ``set_epoch(epoch)`` before each epoch for a new order.

    ``generator``: draw each epoch's permutation from this NumPy generator instead (not in PyTorch);
    every replica must hold one in the same state. ``python -m chainrule train --nproc N`` passes the
    generator that initialized the model, so N processes shuffle exactly as one process does.

    ``num_replicas`` and ``rank`` default, as in PyTorch, to the world size and this process's rank
    in the ``cr.distributed`` process group; without an initialized group pass them (a single
    process: ``num_replicas=1, rank=0``).

    >>> import chainrule as cr
    >>> [list(cr.data.DistributedSampler(10, num_replicas=4, rank=r, shuffle=False)) for r in range(4)]
    [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    """

    def __init__(self, dataset_or_n: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, generator: Any = None) -> None:
        if num_replicas is None or rank is None:
            group = PROCESS.group              # registered by cr.distributed.init_process_group
            if group is None:
                raise ValueError("DistributedSampler: no cr.distributed process group is initialized, so "
                                 "num_replicas= and rank= cannot be taken from it: call "
                                 "cr.distributed.init_process_group() first, or pass them (one process: "
                                 "num_replicas=1, rank=0)")
            num_replicas = group.size if num_replicas is None else num_replicas
            rank = group.rank if rank is None else rank
        n = dataset_or_n if isinstance(dataset_or_n, (int, np.integer)) else len(dataset_or_n)
        if n < 0:
            raise ValueError(f"DistributedSampler: the dataset size must be >= 0, got {n}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.n, self.num_replicas, self.rank = int(n), int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.generator = shuffle, int(seed), drop_last, generator
        self.epoch = 0
        if drop_last and self.n % self.num_replicas:
            self.num_samples = math.ceil((self.n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(self.n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration gives (shuffle: seeded with ``seed + epoch``)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            rng = self.generator if self.generator is not None else np.random.default_rng(self.seed + self.epoch)
            indices = rng.permutation(self.n).tolist()
        else:
            indices = list(range(self.n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])


@functools.cache
def load_devils_dictionary() -> str:
    """Ambrose Bierce's *The Devil's Dictionary* (1911, public domain): 380,575 ASCII characters,
    999 entries, read (once, then cached) from the gzipped file shipped with chainrule.

    Source and what was cleaned (trailing spaces, section letters, end marks):
    ``chainrule/data/README.txt``.

    >>> import chainrule as cr
    >>> text = cr.data.load_devils_dictionary()
    >>> len(text), text[:31]
    (380575, 'ABASEMENT, n.  A decent and cus')
    """
    with gzip.open(DEVILS_DICTIONARY_PATH, "rb") as f:
        return f.read().decode("ascii")


# the dictionary's headwords open a paragraph with a capital; an entry's verse is indented and its
# prose continued after a quotation starts in lower case, so neither starts a new entry
_ENTRY_START = re.compile(r"\n\n[A-Z]")
_SPLITS = ("train", "val")


class CharCorpus:
    """A text as a character-level language-modelling data set: a sorted character vocabulary, and
    a train/validation split by entry, each split the ids of its entries concatenated in text order.

    An entry starts at the text's start and at every paragraph that opens with a capital letter
    after a blank line (the dictionary's headwords), and runs up to the next one, its trailing
    blank line included.

    The entries are shuffled with ``np.random.default_rng(seed)`` and ``round(val_fraction * n)``
    of them go to validation; every character lands in exactly one split. The vocabulary is the
    whole text's, so the validation split has no unknown characters.

    >>> import chainrule as cr
    >>> corpus = cr.data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=0)
    >>> len(corpus.vocab), corpus.entries, len(corpus.train) + len(corpus.val)
    (81, (899, 100), 380575)
    >>> x, y = corpus.batch("train", batch_size=4, n_ctx=16)
    >>> x.shape, bool((x.data[:, 1:] == y.data[:, :-1]).all())
    ((4, 16), True)
    """

    def __init__(self, text: str, val_fraction: float = 0.1, seed: int = 0) -> None:
        if not isinstance(text, str) or not text:
            raise DataError(f"CharCorpus: text must be a non-empty str, got {type(text).__name__} "
                            f"of length {len(text) if hasattr(text, '__len__') else '?'}")
        if not 0 <= val_fraction < 1:
            raise DataError(f"CharCorpus: val_fraction must be in [0, 1), got {val_fraction}")
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        present = np.flatnonzero(np.bincount(codes))
        self.vocab: tuple[str, ...] = tuple(map(chr, present.tolist()))
        self._codes = present.astype(np.uint32)                        # id -> code point
        self._lut = np.full(int(present[-1]) + 1, -1, dtype=np.int64)   # code point -> id, -1: not in vocab
        self._lut[present] = np.arange(len(present))
        ids = self._lut[codes]

        starts = [0] + [m.start() + 2 for m in _ENTRY_START.finditer(text)] + [len(text)]
        bounds = np.array(starts)
        n = len(bounds) - 1
        n_val = int(round(val_fraction * n))
        if n - n_val < 1:
            raise DataError(f"CharCorpus: val_fraction={val_fraction} of the text's {n} entries leaves none "
                            f"for training: use a smaller val_fraction or a text with more entries")
        is_val = np.zeros(n, dtype=bool)
        is_val[np.random.default_rng(seed).permutation(n)[:n_val]] = True
        char_is_val = np.repeat(is_val, np.diff(bounds))
        self.train: np.ndarray = ids[~char_is_val]
        self.val: np.ndarray = ids[char_is_val]
        self.entries: tuple[int, int] = (n - n_val, n_val)

    @classmethod
    def devils_dictionary(cls, val_fraction: float = 0.1, seed: int = 0) -> CharCorpus:
        """``CharCorpus(load_devils_dictionary(), val_fraction, seed)``.

        >>> import chainrule as cr
        >>> cr.data.CharCorpus.devils_dictionary(val_fraction=0.2, seed=1).entries
        (799, 200)
        """
        return cls(load_devils_dictionary(), val_fraction, seed)

    def __repr__(self) -> str:
        return (f"CharCorpus(vocab={len(self.vocab)}, train={len(self.train)} chars, val={len(self.val)} "
                f"chars, entries={self.entries})")

    def encode(self, text: str) -> np.ndarray:
        """The ids (int64) of ``text``'s characters.

        >>> import chainrule as cr
        >>> corpus = cr.data.CharCorpus("ba\\n\\nab\\n\\n")
        >>> corpus.vocab, corpus.encode("abba").tolist()
        (('\\n', 'a', 'b'), [1, 2, 2, 1])
        """
        if not isinstance(text, str):
            raise DataError(f"CharCorpus.encode: text must be a str, got {type(text).__name__}; "
                            f"to turn ids back into text use corpus.decode")
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        ids = self._lut[np.minimum(codes, len(self._lut) - 1)]
        unknown = (ids < 0) | (codes >= len(self._lut))
        if unknown.any():
            missing = sorted({text[i] for i in np.flatnonzero(unknown)[:1000].tolist()})
            raise DataError(f"CharCorpus.encode: characters {''.join(missing)!r} (e.g. at position "
                            f"{int(np.argmax(unknown))}) are not in the corpus' vocabulary of {len(self.vocab)} "
                            f"characters; remove or replace them (the vocabulary is corpus.vocab)")
        return ids

    def decode(self, ids: Any) -> str:
        """The text of a 1-d sequence of ids (an array, a list or a Tensor).

        >>> import chainrule as cr
        >>> corpus = cr.data.CharCorpus.devils_dictionary()
        >>> corpus.decode(corpus.encode("Devil")), corpus.decode(cr.tensor([4, 0]))
        ('Devil', '$\\n')
        """
        arr = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
        if arr.size == 0:
            return ""
        if arr.ndim > 1 or arr.dtype.kind not in "iu":
            raise DataError(f"CharCorpus.decode: ids must be a 1-d sequence of integers, got shape {arr.shape} "
                            f"dtype {arr.dtype}; decode one row at a time (corpus.decode(x[0]))")
        if arr.min() < 0 or arr.max() >= len(self.vocab):
            raise DataError(f"CharCorpus.decode: ids must be in [0, {len(self.vocab)}) (the vocabulary size), got "
                            f"values from {arr.min()} to {arr.max()}")
        return self._codes[arr.reshape(-1)].tobytes().decode("utf-32-le")

    def _split(self, split: str, method: str, batch_size: int, n_ctx: int) -> np.ndarray:
        if split not in _SPLITS:
            raise DataError(f"CharCorpus.{method}: split must be 'train' or 'val', got {split!r}")
        data = self.train if split == "train" else self.val
        for name, value in (("batch_size", batch_size), ("n_ctx", n_ctx)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise DataError(f"CharCorpus.{method}: {name} must be an int >= 1, got {value!r}")
        if n_ctx >= len(data):
            raise DataError(f"CharCorpus.{method}: n_ctx={n_ctx} needs a split longer than n_ctx + 1 characters; "
                            f"the {split!r} split has {len(data)}: use a smaller n_ctx "
                            f"(or a larger val_fraction for 'val')")
        return data

    def batch(self, split: str, batch_size: int, n_ctx: int,
              generator: Any = None) -> tuple[Tensor, Tensor]:
        """``batch_size`` random windows of ``split``: x (batch_size, n_ctx) int64 and its next
        characters y (x shifted by one). The starts are uniform on ``[0, len - n_ctx - 1]``, drawn
        from ``generator`` (a NumPy Generator) or chainrule's default one (``cr.random.manual_seed``).

        >>> import chainrule as cr, numpy as np
        >>> corpus = cr.data.CharCorpus.devils_dictionary()
        >>> x, y = corpus.batch("val", 2, 8, generator=np.random.default_rng(0))
        >>> x.shape, str(y.dtype), corpus.decode(x[0])[1:] == corpus.decode(y[0])[:-1]
        ((2, 8), 'int64', True)
        """
        data = self._split(split, "batch", batch_size, n_ctx)
        starts = get_generator(generator).integers(0, len(data) - n_ctx, size=int(batch_size))
        window = data[starts[:, None] + np.arange(n_ctx + 1)]
        return Tensor(np.ascontiguousarray(window[:, :-1])), Tensor(np.ascontiguousarray(window[:, 1:]))

    def windows(self, split: str, batch_size: int, n_ctx: int) -> Iterator[tuple[Tensor, Tensor]]:
        """Every consecutive non-overlapping window of ``split`` once, in order, ``batch_size`` at a
        time (the last batch may be smaller): (x, y) as in ``batch``; window k is
        ``split[k*n_ctx : (k+1)*n_ctx]``. A tail too short for a window (with its next character) is
        dropped. For a deterministic validation loss.

        >>> import chainrule as cr
        >>> corpus = cr.data.CharCorpus.devils_dictionary()
        >>> [x.shape for x, y in corpus.windows("val", 100, 128)]
        [(100, 128), (100, 128), (67, 128)]
        """
        data = self._split(split, "windows", batch_size, n_ctx)
        n_windows = (len(data) - 1) // n_ctx
        x = data[:n_windows * n_ctx].reshape(n_windows, n_ctx)
        y = data[1:n_windows * n_ctx + 1].reshape(n_windows, n_ctx)
        return ((Tensor(x[i:i + batch_size]), Tensor(y[i:i + batch_size])) for i in range(0, n_windows, batch_size))

    def unigram_bits(self) -> float:
        """The unigram baseline in bits per character: the cross-entropy, on the validation split, of
        the train split's character frequencies (add-one smoothed over the vocabulary).

        >>> import chainrule as cr
        >>> round(cr.data.CharCorpus.devils_dictionary().unigram_bits(), 4)
        4.4704
        """
        if not len(self.val):
            raise DataError("CharCorpus.unigram_bits: the validation split is empty (val_fraction=0 or too few "
                            "entries); build the corpus with a val_fraction > 0")
        counts = np.bincount(self.train, minlength=len(self.vocab)) + 1.0
        return float(-np.log2(counts / counts.sum())[self.val].mean())
