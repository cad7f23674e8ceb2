"""PyTorch's ``.pt`` files read without PyTorch (python/ringgnn/models/torchfile.py): what ``torch.load``
gives, tensors as numpy arrays (views, offsets, shared and scalar storages, every dtype a
checkpoint holds), and a file that is not one, or that names code, refused with its path."""

from __future__ import annotations

import collections
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

from ringgnn import InputError
from ringgnn.models.torchfile import load


def _same(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, np.ndarray), type(got)
        ref = want.view(torch.int16).numpy().view(np.uint16) if want.dtype == torch.bfloat16 else want.numpy()
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
    elif isinstance(want, dict):
        assert type(got) is type(want) and list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want


def test_what_torch_load_gives_as_numpy(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    sd = collections.OrderedDict(
        w=torch.randn(5, 3), view=base[1:3, 2:5], col=base[:, 1], t=base.t(), scalar=torch.tensor(2.5),
        long=torch.arange(7, dtype=torch.int64)[2:], half=torch.randn(4).half(), bf16=torch.randn(3).bfloat16(),
        flag=torch.tensor([True, False]), byte=torch.tensor([1, 255], dtype=torch.uint8),
        i32=torch.tensor([-3, 4], dtype=torch.int32), f64=torch.tensor([1e300]), empty=torch.empty(0, 4))
    sd.same = base  # an attribute of the dict (PyG's state dicts carry _metadata this way)
    obj = dict(model=sd, args={"fanouts": [10, 5], "lr": 0.01, "task": None, "betas": (0.9, 0.99), "on": True},
               rng=torch.get_rng_state(), epoch=3, shared=(base, base[2]))
    path = tmp_path / "ck.pt"
    torch.save(obj, path)
    got = load(str(path))
    _same(got, torch.load(path, weights_only=True))
    assert got["model"].same.shape == (4, 6)
    got["shared"][0][2, 0] = -1  # each tensor owns its elements
    assert got["shared"][1][0] == 12


def test_a_run_checkpoint_reads_as_torch_load_does(tmp_path):
    from torch_geometric.nn import GAT

    net = GAT(8, 6, 2, 3, act="relu")
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(5, 8), torch.tensor([[0, 1], [1, 2]])).sum().backward()
    opt.step()
    obj = dict(model=net.state_dict(), optimizer=opt.state_dict(), epoch=0, args={"model": "gat"}, metrics={},
               rng=torch.get_rng_state())
    torch.save(obj, tmp_path / "best.pt")
    _same(load(str(tmp_path / "best.pt")), torch.load(tmp_path / "best.pt", weights_only=True))


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_files_that_are_not_checkpoints_are_refused_with_their_path(tmp_path):
    bad = tmp_path / "text.pt"
    bad.write_text("not a zip")
    with pytest.raises(InputError, match=f"{bad}: not a readable checkpoint .*zip format"):
        load(str(bad))
    # a zip without a pickle
    empty = tmp_path / "empty.pt"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("x/readme", "hello")
    with pytest.raises(InputError, match="no NAME/data.pkl"):
        load(str(empty))
    # a pickle that names code: never run
    evil = tmp_path / "evil.pt"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("evil/data.pkl", pickle.dumps({"model": _Boom()}, protocol=2))
    with pytest.raises(InputError, match=r"evil.pt: not a readable checkpoint \(it names posix.system"):
        load(str(evil))
    # a storage shorter than its tensors say
    torch.save({"w": torch.zeros(8)}, tmp_path / "ok.pt")
    cut = tmp_path / "cut.pt"
    with zipfile.ZipFile(tmp_path / "ok.pt") as src, zipfile.ZipFile(cut, "w") as dst:
        for n in src.namelist():
            data = src.read(n)
            dst.writestr(n, data[:8] if n.endswith("/data/0") else data)
    with pytest.raises(InputError, match="cut.pt: not a readable checkpoint .*storage 0 holds 2 elements, not 8"):
        load(str(cut))
    with pytest.raises(FileNotFoundError):
        load(str(tmp_path / "missing.pt"))


def test_skipped_parts_are_never_read_and_whole_storages_are_used_as_read(tmp_path):
    """``skip`` leaves a top-level key out before any storage is read: an archive without the
    optimizer's storage still loads without it (and is refused with it). A tensor over all of its
    storage is the buffer read (writable, no second copy); a part of one gets its own elements."""
    w = torch.randn(4, 3)
    torch.save(dict(model={"w": w, "t": w.t(), "row": w[1]}, optimizer={"state": {0: torch.randn(1000)}}),
               tmp_path / "ck.pt")
    with zipfile.ZipFile(tmp_path / "ck.pt") as z:
        entries = {n: z.read(n) for n in z.namelist()}
    big = max((n for n in entries if "/data/" in n), key=lambda n: len(entries[n]))  # the optimizer's 4000 bytes
    with zipfile.ZipFile(tmp_path / "cut.pt", "w") as z:
        for n, data in entries.items():
            if n != big:
                z.writestr(n, data)
    got = load(str(tmp_path / "cut.pt"), skip=("optimizer",))
    assert list(got) == ["model"]
    _same(got["model"], {"w": w, "t": w.t(), "row": w[1]})
    assert got["model"]["w"].flags.writeable and got["model"]["w"].base is not None
    got["model"]["row"][0] = 99.0
    assert got["model"]["w"][1, 0] == w[1, 0]
    with pytest.raises(InputError, match="not a readable checkpoint"):
        load(str(tmp_path / "cut.pt"))
