"""Every public attribute of :class:`ringgnn.Loader` and :class:`ringgnn.LinkLoader` answers in
both of their modes: without times (the homogeneous engine) and at times (the typed engine's
one-type case), on a small generated graph with uniform edge and node times
(``ringgnn generate sbm --edge-time uniform --node-time uniform --link-split-time ...``)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import _temporal

import ringgnn
from ringgnn import InputError
from ringgnn.data import build
from ringgnn.sampling.links import LinkLoader

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

BACKENDS = ("memory", "uring", "pread")


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """300 nodes, 4 features, uniform edge and node times in [0, 1000); edges after 800 held out
    for link prediction (val until 900, test after), 3 negatives each."""
    d = tmp_path_factory.mktemp("modes") / "g"
    build.generate_sbm(d, nodes=300, classes=3, avg_degree=8, feature_dim=4, seed=2, edge_time="uniform",
                       node_time="uniform", time_range=(0, 1000), link_split_time="val=800,test=900",
                       link_negatives=3)
    return ringgnn.Dataset.open(d)


def _public(obj):
    """Every public attribute of ``obj`` by name, each method that needs no argument called."""
    got = {}
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if inspect.ismethod(value):
            needed = [p for p in inspect.signature(value).parameters.values()
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if not needed:
                value = value()
        got[name] = value
    return got


def _modes(make):
    """``make(at_times)`` in both modes, each iterated over one epoch: (loader, its batches)."""
    out = {}
    for at in (False, True):
        loader = make(at)
        out[at] = loader, list(loader)
    return out


def _check_reports(loader, batches, at):
    """What both loaders report the same way in either mode (their engines' own words)."""
    attrs = _public(loader)
    assert (loader.typed is not None) == at
    assert loader.backend in BACKENDS or loader.backend.startswith("auto")
    assert loader.feature_backend == (loader.typed.features.backends["node"] if at else
                                      loader._core.feature_backend)
    assert loader.feature_backend in BACKENDS + ("auto",)
    assert attrs["stats"]["batches"] == len(batches) == len(loader) == attrs["epoch_batches"] > 0
    assert attrs["plan"]["text"] and "note" in attrs["plan"]
    assert attrs["epoch_order"] == list(range(len(batches))) and loader.epoch == 1
    assert loader.last_epoch["batches"] == len(batches)
    assert str(loader.dataset.path) in repr(loader)
    return attrs


def test_every_loader_attribute_answers_in_both_modes(timed):
    runs = _modes(lambda at: ringgnn.Loader(timed, [3, 2], 64, split="train", backend="pread", threads=1,
                                            ignore_time=not at))
    names = {}
    for at, (loader, batches) in runs.items():
        attrs = _check_reports(loader, batches, at)
        names[at] = set(attrs)
        assert loader.feature_backend == "pread"  # the backend given, in both modes
        assert loader.backend.startswith("pread")
        assert attrs["fanouts"] == [3, 2] and attrs["batch_size"] == 64 and attrs["batches"] is None
        np.testing.assert_array_equal(loader.seeds, timed.split("train"))
        assert (loader.seed_time is not None) == at
        assert sum(b.batch_size for b in batches) == len(timed.split("train"))
        if at:
            assert set(attrs["stats"]) == {"batches", "features"}
            np.testing.assert_array_equal(loader.seed_time, timed.node_times()[loader.seeds])
        else:
            assert attrs["stats"]["feature_backend"] == "pread"
    assert names[True] == names[False]


def test_every_link_loader_attribute_answers_in_both_modes(timed):
    """The defect this fixes: ``feature_backend`` (and ``seeds``) of a LinkLoader at times raised
    AttributeError, its homogeneous engine's loader being absent."""
    val = timed.edge_split("val")
    runs = _modes(lambda at: LinkLoader(timed, [3, 2], 16, edges="val", negatives=timed.edge_negatives("val"),
                                        shuffle=False, backend="pread", threads=1, ignore_time=not at))
    names = {}
    for at, (loader, batches) in runs.items():
        attrs = _check_reports(loader, batches, at)
        names[at] = set(attrs)
        assert loader.backend.startswith("pread") and loader.feature_backend == "pread"  # the backend given
        assert attrs["fanouts"] == [3, 2] and attrs["batch_size"] == 16
        assert loader.edges.shape == val.shape and (loader.time is not None) == at
        # The look-ahead's seeds: the endpoints of the first batches (here every pair's).
        np.testing.assert_array_equal(loader.seeds, np.unique(val))
        assert sum(len(b.input_id) for b in batches) == val.shape[1]
        if at:
            np.testing.assert_array_equal(loader.time, timed.edge_split_times("val"))
            assert set(attrs["stats"]) == {"batches", "features"}
        else:
            assert attrs["stats"]["feature_backend"] == "pread"
    assert names[True] == names[False]
    # A LinkLoader at times shares no engine: another one cannot take it as share=.
    with pytest.raises(InputError, match="samples at times, on the typed engine"):
        LinkLoader(timed, [3, 2], 16, edges="val", shuffle=False, ignore_time=True, share=runs[True][0])


def test_a_featureless_loader_is_refused_in_both_modes(tmp_path):
    """A dataset without features: ``Loader`` and ``LinkLoader`` refuse it alike, at times and
    without (a LinkLoader at times used to take it and report ``feature_backend`` None, where
    without times it was refused)."""
    ds = ringgnn.Dataset.open(_temporal.example(tmp_path) / "ds")  # docs/FORMAT.md's example: times, no features
    assert ds.feature_dim is None and ds.has_times
    pairs = np.array([[2, 7], [1, 1]])
    for at in (False, True):
        timed = dict(edge_label_time=np.array([6, 6])) if at else dict(ignore_time=True)
        with pytest.raises(InputError, match="the dataset has no node features; rebuild it with --features"):
            LinkLoader(ds, [2], 4, edges=pairs, **timed)
        node = dict(input_time=np.zeros(ds.num_nodes, np.int64)) if at else dict(ignore_time=True)
        with pytest.raises(InputError, match="the dataset has no node features; rebuild it with --features"):
            ringgnn.Loader(ds, [2], 4, split=None, **node)
