"""cr.data.DistributedSampler (torch.utils.data.DistributedSampler's rule) and DataLoader(sampler=)."""
from __future__ import annotations

import itertools
import os
import threading
import types
from collections import Counter

import numpy as np
import pytest

import chainrule as cr
import chainrule.distributed as dist
from chainrule.core.grad_mode import PROCESS
from chainrule.data import DataLoader, DistributedSampler
from chainrule.distributed import collectives

COMBOS = [(n, r, d) for n in (0, 1, 2, 3, 5, 7, 8, 10, 16, 17, 31, 100, 101)
          for r in (1, 2, 3, 4, 7, 8) for d in (False, True)]


def _all(n, replicas, drop_last=False, shuffle=True, seed=0, epoch=0):
    out = []
    for r in range(replicas):
        s = DistributedSampler(n, num_replicas=replicas, rank=r, shuffle=shuffle, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


@pytest.mark.parametrize("n,replicas,drop_last", COMBOS)
def test_lengths_and_unshuffled_lists_equal_torch(n, replicas, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler as TorchSampler
    for rank in range(replicas):
        ours = DistributedSampler(n, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        assert len(ours) == len(theirs) == len(list(ours))
        assert list(ours) == list(theirs)
        # shuffled: the same lengths as torch
        ours = DistributedSampler(n, num_replicas=replicas, rank=rank, shuffle=True, drop_last=drop_last)
        theirs = TorchSampler(range(n), num_replicas=replicas, rank=rank, shuffle=True, drop_last=drop_last)
        assert len(list(ours)) == len(list(theirs)) == len(theirs)
    del torch


@pytest.mark.parametrize("n,replicas,drop_last", COMBOS)
def test_replicas_cover_range_with_wraparound_padding(n, replicas, drop_last):
    for shuffle in (False, True):
        lists = _all(n, replicas, drop_last=drop_last, shuffle=shuffle, epoch=3)
        assert len({len(x) for x in lists}) == 1          # evenly divided
        counts = Counter(itertools.chain.from_iterable(lists))
        assert all(0 <= i < n for i in counts)
        total = sum(counts.values())
        if drop_last:
            assert total == (n // replicas) * replicas
            assert all(c == 1 for c in counts.values())    # nothing repeated, the tail dropped
        else:
            assert set(counts) == set(range(n))            # every index, some twice or more (padding)
            assert total == -(-n // replicas) * replicas
            assert total - n == sum(c - 1 for c in counts.values())


def test_padding_wraps_around_the_shuffled_order():
    n, replicas = 10, 4
    perm = np.random.default_rng(5 + 2).permutation(n).tolist()
    padded = perm + perm[:2]
    for r, got in enumerate(_all(n, replicas, seed=5, epoch=2)):
        assert got == padded[r::replicas]


def test_padding_repeats_when_fewer_examples_than_replicas():
    assert _all(2, 5, shuffle=False) == [[0], [1], [0], [1], [0]]
    assert _all(3, 4, drop_last=True) == [[], [], [], []]


def test_set_epoch_changes_the_order_and_is_deterministic():
    a = DistributedSampler(100, num_replicas=3, rank=1, seed=7)
    e0 = list(a)
    assert list(a) == e0                                   # same epoch, same order
    a.set_epoch(1)
    e1 = list(a)
    assert e1 != e0 and len(e1) == len(e0)
    b = DistributedSampler(100, num_replicas=3, rank=1, seed=7)
    b.set_epoch(1)
    assert list(b) == e1                                   # another process, same seed and epoch
    c = DistributedSampler(100, num_replicas=3, rank=1, seed=8)
    c.set_epoch(1)
    assert list(c) != e1
    assert list(DistributedSampler(10, num_replicas=1, rank=0, shuffle=False)) == list(range(10))


def test_accepts_a_sized_dataset_and_validates_arguments():
    assert len(DistributedSampler(np.zeros((9, 2)), num_replicas=2, rank=0)) == 5
    with pytest.raises(ValueError, match="num_replicas= and rank="):
        DistributedSampler(10)
    with pytest.raises(ValueError, match="num_replicas= and rank="):
        DistributedSampler(10, num_replicas=2)
    with pytest.raises(ValueError, match=r"invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(10, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="invalid rank -1"):
        DistributedSampler(10, num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(10, num_replicas=0, rank=0)


def test_dataloader_takes_a_sampler_per_epoch():
    x, y = np.arange(10.0)[:, None], np.arange(10)
    sampler = DistributedSampler(10, num_replicas=2, rank=1, seed=3)
    loader = DataLoader(x, y, batch_size=2, sampler=sampler)
    assert len(loader) == 3
    seen = [yb.data.tolist() for _, yb in loader]
    assert list(itertools.chain.from_iterable(seen)) == list(sampler) and [len(b) for b in seen] == [2, 2, 1]
    for _, yb in loader:
        assert yb.shape == (2,) or yb.shape == (1,)
    sampler.set_epoch(1)
    assert list(itertools.chain.from_iterable(yb.data.tolist() for _, yb in loader)) == list(sampler)
    dl = DataLoader(x, y, batch_size=2, sampler=sampler, drop_last=True)
    assert len(dl) == 2 and [len(yb) for _, yb in dl] == [2, 2]
    xb, yb = next(iter(DataLoader(x, y, batch_size=3, sampler=[4, 1, 7])))
    assert yb.data.tolist() == [4, 1, 7] and xb.data[:, 0].tolist() == [4.0, 1.0, 7.0]


def test_dataloader_sampler_excludes_shuffle_and_needs_len_for_len():
    x, y = np.arange(4.0), np.arange(4)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(x, y, shuffle=True, sampler=[0, 1])
    loader = DataLoader(x, y, batch_size=3, sampler=iter([3, 2, 1, 0]))
    with pytest.raises(TypeError, match="sampler with a length"):
        len(loader)
    assert [yb.data.tolist() for _, yb in loader] == [[3, 2, 1], [0]]


def test_dataloader_len_equals_torch_with_a_sampler():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader
    from torch.utils.data import DistributedSampler as TorchSampler
    for n, replicas, drop_last in [(10, 3, False), (10, 3, True), (17, 4, False), (5, 8, False)]:
        for b in (1, 2, 3):
            for loader_drop in (False, True):
                ours = DataLoader(np.zeros(n), np.zeros(n), batch_size=b, drop_last=loader_drop,
                                  sampler=DistributedSampler(n, num_replicas=replicas, rank=0,
                                                             drop_last=drop_last))
                theirs = TorchLoader(range(n), batch_size=b, drop_last=loader_drop,
                                     sampler=TorchSampler(range(n), num_replicas=replicas, rank=0,
                                                          drop_last=drop_last))
                assert len(ours) == len(theirs) == len(list(ours))
    del torch


def test_exported_from_cr_data():
    assert cr.data.DistributedSampler is DistributedSampler


def test_rank_and_world_size_come_from_the_process_group(monkeypatch):
    for k in [k for k in os.environ if collectives.launched_by_mpi({k: os.environ[k], "SLURM_NTASKS": "2"})]:
        monkeypatch.delenv(k)
    dist.init_process_group()                               # a world of one
    try:
        s = DistributedSampler(10, shuffle=False)
        assert (s.num_replicas, s.rank, list(s)) == (1, 0, list(range(10)))
    finally:
        dist.destroy_process_group()
    assert PROCESS.group is None
    with pytest.raises(ValueError, match="no cr.distributed process group is initialized"):
        DistributedSampler(10)
    # a group of 4 seen from rank 2 (what init_process_group registers under mpiexec -n 4)
    monkeypatch.setattr(PROCESS, "group", types.SimpleNamespace(rank=2, size=4))
    assert list(DistributedSampler(10, shuffle=False)) == [2, 6, 0]                  # padded by wrapping
    with pytest.raises(ValueError, match="invalid rank 2"):                  # the group's rank, 2 replicas
        DistributedSampler(10, num_replicas=2)
    assert DistributedSampler(10, rank=1).rank == 1 and DistributedSampler(10, rank=1).num_replicas == 4
    seen = []
    thread = threading.Thread(target=lambda: seen.append(DistributedSampler(10).rank))   # process-wide
    thread.start()
    thread.join()
    assert seen == [2]
