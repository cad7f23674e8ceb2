"""Tasks (python/ringgnn/training/tasks.py): what node classification tells the training loop, on stand-ins
small enough to check by hand (the loop itself is tests/test_train.py's)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from ringgnn import InputError
from ringgnn.training.tasks import NodeClassification


class Rows(torch.nn.Module):
    """An encoder stand-in: row ``i`` of the output is ``x[i] @ w``, whatever the edges."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))

    def forward(self, x, edge_index):
        return x @ self.w


def batch(y):
    """A sampled batch of 2 seeds (labels ``y``) and one neighbor."""
    x = torch.tensor([[2.0, 0.0], [0.0, 3.0], [5.0, 5.0]])
    return SimpleNamespace(x=x, edge_index=torch.tensor([[2, 2], [0, 1]]), y=torch.tensor(y + [0]), batch_size=2)


def test_loss_is_cross_entropy_over_the_labeled_seeds():
    loss, n = NodeClassification().loss(Rows(), batch([0, -1]), "cpu", "gcn")
    assert n == 1
    assert loss.item() == pytest.approx(-math.log(math.exp(2) / (math.exp(2) + 1)))


def test_a_batch_without_labels_has_no_loss_unless_every_rank_must_step():
    task, net = NodeClassification(), Rows()
    assert task.loss(net, batch([-1, -1]), "cpu", "gcn") == (None, 0)
    loss, n = task.loss(net, batch([-1, -1]), "cpu", "gcn", always=True)
    assert n == 0 and loss.item() == 0.0
    loss.backward()  # a graph to join DDP's all-reduce with, of zero gradient
    assert torch.equal(net.w.grad, torch.zeros(2, 2))


def test_scores_summary_and_log_lines():
    task = NodeClassification()
    assert task.keys() == ["val_acc", "test_acc"]
    assert task.scores([3, 4, 1, 2]) == {"val_acc": 0.75, "test_acc": 0.5}
    assert math.isnan(task.scores([0, 0, 1, 2])["val_acc"])  # no labeled val node: nan, not an error
    history = [dict(epoch=0, val_acc=0.5, test_acc=0.4), dict(epoch=1, val_acc=0.7, test_acc=0.6),
               dict(epoch=2, val_acc=0.7, test_acc=0.9)]
    best = task.summary(history)
    assert best == {"best_val_acc": 0.7, "test_acc": 0.6, "best_epoch": 1}  # the first epoch wins a tie
    assert list(best) == ["best_val_acc", "test_acc", "best_epoch"]  # metrics.json's order
    assert task.summary([]) == {"best_val_acc": None, "test_acc": None, "best_epoch": None}
    assert task.describe(history[1]) == "val acc 0.7000, test acc 0.6000"
    assert task.describe_best(best) == "best val acc 0.7000 at epoch 1, test acc 0.6000"


def test_check_names_what_the_dataset_lacks():
    task = NodeClassification()
    ds = SimpleNamespace(path="d", num_classes=None, split_names=["train", "val", "test"])
    with pytest.raises(InputError, match="no labels; rebuild it with --labels"):
        task.check(ds)
    ds.num_classes = 3
    task.check(ds)
    ds.split_names = ["train"]
    with pytest.raises(InputError, match="no val/test split"):
        task.check(ds)
