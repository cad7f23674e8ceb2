"""Tests of ringgnn.data.generate (``generate hetero``): the dataset's shape, reproducibility, the
planted structure measured against the model's formulas, the property the training tests rely on
(features alone are weak, a typed rule is strong) and argument errors that leave nothing behind."""

from __future__ import annotations

import inspect
import os
from typing import Dict, List, Tuple

import numpy as np
import pytest

import ringgnn
from ringgnn import _core
from ringgnn.data.dataset import Dataset, HeteroDataset
from ringgnn.data.generate import DEFAULTS, _Permutation, generate_hetero

SMALL = dict(papers=3000, authors=2000, institutions=50)
C, D, HW, HC, HA, KW, KC = 8, 64, 0.85, 0.3, 0.8, 3.0, 8.0
RELATIONS = ["author:affiliated_with:institution", "author:writes:paper", "paper:cites:paper"]
REVERSED = ["institution:rev_affiliated_with:author", "paper:rev_writes:author", "paper:rev_cites:paper"]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> HeteroDataset:
    out = tmp_path_factory.mktemp("gen") / "mag"
    generate_hetero(out, **SMALL)
    return Dataset.open(out)


def edges(ds: HeteroDataset, rel: str) -> Tuple[np.ndarray, np.ndarray]:
    """(src, dst) of every edge of ``rel``."""
    r = ds.relation(rel)
    n = len(r.indptr()) - 1
    src = np.concatenate([r.neighbors(v) for v in range(n)])
    return src, np.repeat(np.arange(n), r.degrees())


def crcs(manifest) -> Dict[str, str]:
    return {k: f["crc32c"] for k, f in manifest["files"].items()}


# --- shape and reproducibility ------------------------------------------------------------------


def test_dataset_has_the_types_relations_features_labels_and_splits(small):
    assert isinstance(small, HeteroDataset)
    assert small.node_types == ["author", "institution", "paper"]
    assert small.num_nodes_dict == {"author": 2000, "institution": 50, "paper": 3000}
    assert small.relations == sorted(RELATIONS + REVERSED)
    assert small.feature_dims() == {"author": None, "institution": None, "paper": D}
    for t in ("author", "institution"):
        part = small.node_type(t)
        assert part.labels is None and part.split_names == []
    paper = small.node_type("paper")
    assert paper.num_classes == C and paper.split_names == ["test", "train", "val"]
    sizes = {s: len(paper.split(s)) for s in paper.split_names}
    assert sizes == {"train": 1800, "val": 600, "test": 600}
    ids = np.concatenate([paper.split(s) for s in paper.split_names])
    assert len(np.unique(ids)) == 3000  # a partition
    assert all(np.all(np.diff(paper.split(s)) > 0) for s in paper.split_names)
    assert np.ptp(np.bincount(paper.labels, minlength=C)) <= 1  # balanced classes
    for rel, rev in zip(RELATIONS, REVERSED):
        assert small.num_edges_dict[rel] == small.num_edges_dict[rev]
    # every author has exactly one institution
    assert np.all(small.relation("institution:rev_affiliated_with:author").degrees() == 1)
    source = small.manifest["source"]
    assert source["command"] == "generate hetero" and source["papers"] == 3000 and source["feature_noise_calibrated"]
    ringgnn.data.build.verify(small.path)


def test_same_arguments_give_the_same_files_whatever_threads_and_memory(small, tmp_path):
    class Recorder:
        def __init__(self):
            self.done: Dict[str, int] = {}
            self.current = ""

        def stage(self, name, total, unit):
            self.current = name
            self.done[name] = 0
            self.beside = sorted(os.listdir(tmp_path))

        def advance(self, n):
            self.done[self.current] += n

    rec = Recorder()
    again = generate_hetero(tmp_path / "again", **SMALL, threads=1, memory="200M", progress=rec)
    assert crcs(again) == crcs(small.manifest)
    assert rec.done["generating papers"] == 3000 and rec.done["generating authors"] == 2000
    # the intermediates live in one locked temporary beside the output (the builder's staging is another)
    assert any(n.startswith(".again.gen" + ringgnn._files.MARKER) for n in rec.beside), rec.beside
    assert os.listdir(tmp_path) == ["again"]

    other = generate_hetero(tmp_path / "other", **SMALL, seed=1, add_reverse=False, feature_noise=0.5)
    assert sorted(other["relations"]) == RELATIONS
    assert other["source"]["feature_noise"] == 0.5 and not other["source"]["feature_noise_calibrated"]
    mine, theirs = crcs(small.manifest), crcs(other)
    for key in ("node.paper.features", "node.paper.labels", "relation.author:writes:paper.indices",
                "relation.paper:cites:paper.indices"):
        assert mine[key] != theirs[key], key


def test_defaults_are_the_signatures():
    params = inspect.signature(generate_hetero).parameters
    assert DEFAULTS == {k: params[k].default for k in DEFAULTS}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 1000, 65539])
def test_permutation_is_a_bijection_with_its_inverse(n):
    p = _Permutation(n, seed=7, index=1)
    x = np.arange(n)
    y = p.forward(x)
    assert np.array_equal(np.sort(y), x)
    assert np.array_equal(p.inverse(y), x)
    if n >= 64:  # scattered, not the identity
        assert np.mean(y == x) < 0.1


# --- the planted structure ----------------------------------------------------------------------


def test_degrees_are_the_parameters(small):
    a, p = edges(small, "author:writes:paper")
    assert abs(len(a) / 3000 - KW) < 0.1  # sd 0.026; repeated authors drop ~0.3%
    assert np.all(small.relation("author:writes:paper").degrees() >= 1)  # every paper has an author
    c, d = edges(small, "paper:cites:paper")
    assert abs(len(c) / 3000 - KC) < 0.2  # sd 0.05
    assert not np.any(c == d)  # self-citations are dropped
    assert len(set(zip(c.tolist(), d.tolist()))) == len(c)  # and repeats


def test_citations_keep_their_class_at_the_planted_rate(small):
    y = small.node_type("paper").labels
    c, d = edges(small, "paper:cites:paper")
    expected = HC + (1 - HC) / C
    assert abs(np.mean(y[c] == y[d]) - expected) < 0.02  # sd 0.003


def test_papers_sharing_an_author_share_a_class_at_the_planted_rate(small):
    """Fields are hidden: measured through co-authorship. An author of field f has a fraction
    r = h_w + (1 - h_w)/C of class-f papers, the others uniform over the other classes."""
    y = small.node_type("paper").labels
    rev = small.relation("paper:rev_writes:author")
    same = pairs = 0
    for author in range(2000):
        n = np.bincount(y[rev.neighbors(author)], minlength=C)
        same += int((n * (n - 1)).sum())
        pairs += int(n.sum() * (n.sum() - 1))
    r = HW + (1 - HW) / C
    assert abs(same / pairs - (r * r + (1 - r) ** 2 / (C - 1))) < 0.03
    assert same / pairs > 5 / C


def test_institutions_gather_authors_of_one_field(small):
    """An author's field, estimated as the majority class of its papers (3 or more), mostly
    agrees with the majority estimate of its institution's authors (chance: about 0.2)."""
    y = small.node_type("paper").labels
    rev = small.relation("paper:rev_writes:author")
    field = np.full(2000, -1)
    for author in range(2000):
        papers = rev.neighbors(author)
        if len(papers) >= 3:
            field[author] = np.bincount(y[papers], minlength=C).argmax()
    agree = total = 0
    members = small.relation("author:affiliated_with:institution")
    for i in range(50):
        f = field[members.neighbors(i)]
        f = f[f >= 0]
        if len(f):
            agree += int(np.bincount(f, minlength=C).max())
            total += len(f)
    assert agree / total > 0.6


def test_features_alone_are_weak_and_authors_are_strong(small):
    """The property the heterogeneous training tests rely on: nearest class mean (means from the
    train papers) on paper features is only moderately above chance, while the majority train
    label of the other papers of a paper's authors is far better."""
    paper = small.node_type("paper")
    y, train, test = paper.labels, paper.split("train"), paper.split("test")
    x = _core.FeatureReader(small.path, backend="memory", part="node/paper").gather(np.arange(3000))
    assert x.shape == (3000, D) and x.dtype == np.float32
    means = np.stack([x[train][y[train] == k].mean(0) for k in range(C)])
    features = ((x[test][:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    acc_features = np.mean(features == y[test])

    writes, rev = small.relation("author:writes:paper"), small.relation("paper:rev_writes:author")
    in_train = np.zeros(3000, bool)
    in_train[train] = True
    typed: List[int] = []
    for p in test:
        others = np.concatenate([rev.neighbors(a) for a in writes.neighbors(p)])
        others = others[(others != p) & in_train[others]]
        typed.append(np.bincount(y[others], minlength=C).argmax() if len(others) else -1)
    acc_typed = np.mean(np.array(typed) == y[test])
    assert 1 / C + 0.05 < acc_features < 0.7, acc_features  # measured 0.373 (Bayes: 0.3875)
    assert acc_typed > 0.75 and acc_typed > acc_features + 0.3, (acc_typed, acc_features)  # measured 0.865


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(papers=0), r"papers \(--papers\) must be at least 1"),
        (dict(authors=-3), r"authors \(--authors\) must be at least 1"),
        (dict(institutions=1.5), r"institutions \(--institutions\) must be an integer"),
        (dict(classes=1), r"classes \(--classes\) must be >= 2"),
        (dict(feature_dim=0), r"feature_dim \(--feature-dim\) must be at least 1"),
        (dict(avg_authors=0.5), r"avg_authors \(--avg-authors\) must be in \[1, 256\]"),
        (dict(avg_cites=float("nan")), r"avg_cites \(--avg-cites\)"),
        (dict(homophily_writes=1.2), r"homophily_writes \(--homophily-writes\) must be in \[0, 1\]"),
        (dict(homophily_cites=-0.1), r"homophily_cites \(--homophily-cites\)"),
        (dict(homophily_affiliation="high"), r"homophily_affiliation \(--homophily-affiliation\) must be a number"),
        (dict(feature_noise=-1.0), r"feature_noise \(--feature-noise\)"),
        (dict(split="train=0.8,test=0.4"), r"add up to more than 1"),
        (dict(split="train=a.npy"), r"take fractions"),
        (dict(split="../x=0.5"), r"letters, digits"),
        (dict(seed=-1), r"seed \(--seed\)"),
        (dict(memory="lots"), r"'lots' is not a size"),
        (dict(threads=0), r"threads \(--threads\) must be at least 1"),
        (dict(feature_dim=1, classes=3), r"too small to separate 3 classes"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, change, message):
    with pytest.raises(_core.InputError, match=message):
        generate_hetero(tmp_path / "out", **{**SMALL, **change})
    assert os.listdir(tmp_path) == []


def test_an_existing_output_is_kept_and_nothing_is_left_behind(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ringgnn.DatasetExistsError, match="--overwrite"):
        generate_hetero(out, papers=50, authors=20, institutions=3)
    # --overwrite replaces only datasets: this is refused before generating
    with pytest.raises(ringgnn.RingGnnError):
        generate_hetero(out, papers=50, authors=20, institutions=3, overwrite=True)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(out) == ["keep.txt"]
