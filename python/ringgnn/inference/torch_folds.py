"""The grid's folds in PyTorch (``aggregate="python"``), the second implementation of
the Rust folds: a block's in-edges as sorted ``source * n + destination`` keys, swept in pieces
and folded with ``index_add_``/``scatter_reduce_`` (GAT: an online softmax)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, Sequence, Tuple

import numpy as np

from .._core import InputError


class TorchFolds:
    """The torch folds of the engine's grid (see the module's docstring)."""

    def _pieces(self, prepare: Callable[[int], Tuple[Any, ...]], starts: Sequence[int]) -> Iterator[Tuple[Any, ...]]:
        """``prepare(p)`` for each piece start, in order, the next prepared ahead with ``overlap``."""
        if not self.overlap:
            for p in starts:
                yield prepare(p)
            return
        starts = list(starts)
        with ThreadPoolExecutor(1, thread_name_prefix="ringgnn-infer-read") as pool:
            ahead = pool.submit(prepare, starts[0]) if starts else None
            for i in range(len(starts)):
                got = ahead.result()
                ahead = pool.submit(prepare, starts[i + 1]) if i + 1 < len(starts) else None
                yield got
                del got

    def _sorted_keys(self, a: int, b: int, lo: int, hi: int) -> Tuple[np.ndarray, int]:
        """In-edges ``lo..hi`` of block ``a..b`` as sorted ``source * n +
        local destination`` keys (GCN and GAT: stored self loops dropped); 16 bytes an edge at the peak."""
        g = self.graph
        n_d = b - a
        if g.num_nodes * n_d >= 1 << 63:
            raise InputError("the graph is too large for 64-bit edge keys in one block; give less --memory")
        keys = g.edges(lo, hi, np.uint64)
        ip = g.indptr[a:b + 1]
        counts = np.maximum(np.minimum(ip[1:], hi) - np.maximum(ip[:-1], lo), 0)
        dl = np.repeat(np.arange(n_d, dtype=np.uint32), counts)
        loops = np.empty(0, dtype=np.int64)
        if self.ckpt.kind in ("gcn", "gat"):  # found a million edges at a time: no large temporaries
            step = 1 << 20
            loops = np.concatenate([loops] + [np.flatnonzero(keys[c:c + step] == dl[c:c + step] + np.uint64(a)) + c
                                              for c in range(0, len(keys), step)])
        keys *= np.uint64(n_d)
        keys += dl
        del dl
        keys[loops] = np.iinfo(np.uint64).max  # sorted to the end, then cut off
        keys.sort()
        return keys[: len(keys) - len(loops)], n_d

    def _grid_add(self, k: int, host: Dict[str, np.ndarray], a: int, u: Any, rows: Any, inv: Any, dl: Any) -> None:
        """One piece: edge ``i`` from ``u[inv[i]]`` (rows ``rows``) to ``dl[i]``, folded into ``host``."""
        import torch
        import torch.nn.functional as F

        st = {key: torch.from_numpy(v) for key, v in host.items()}
        kind = self.ckpt.kind
        if kind in ("sage", "gcn") and self._narrow(k):
            conv = self.net.convs[k]
            rows = F.linear(rows, (conv.lin_l if kind == "sage" else conv.lin).weight)  # W x, no bias
        if kind == "sage" and self._aggr(k) == "max":
            st["acc"].scatter_reduce_(0, dl.unsqueeze(-1).expand(-1, rows.shape[1]), rows[inv], reduce="amax")
        elif kind == "sage":
            st["acc"].index_add_(0, dl, rows[inv])
        elif kind == "gcn":
            w = torch.from_numpy(self.dinv)[u][inv] * torch.from_numpy(self.dinv[a:a + len(st["acc"])])[dl]
            st["acc"].index_add_(0, dl, rows[inv] * w.unsqueeze(-1))
        else:
            conv = self.net.convs[k]
            H, C = conv.heads, conv.out_channels
            lin_src = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_src
            xs = lin_src(rows).view(-1, H, C)
            a_src = (xs * conv.att_src).sum(-1)
            e = F.leaky_relu(a_src[inv] + st["a_dst"][dl], conv.negative_slope)
            st["msg"] = st["msg"].view(-1, H, C)
            self._softmax_add(st, dl, e, xs[inv])

    @staticmethod
    def _softmax_add(st: Dict[str, Any], dl: Any, e: Any, xs: Any) -> None:
        """Online softmax: fold logits ``e`` [E, H] of messages ``xs`` [E, H, C] into ``st``."""
        import torch

        m_piece = torch.full_like(st["m"], float("-inf")).scatter_reduce_(0, dl.unsqueeze(-1).expand_as(e), e,
                                                                         reduce="amax")
        m_new = torch.maximum(st["m"], m_piece)
        finite = torch.isfinite(m_new)
        scale = torch.where(finite, torch.exp(st["m"] - torch.where(finite, m_new, 0.0)), torch.zeros_like(m_new))
        p = torch.exp(e - m_new[dl])
        st["z"].copy_(st["z"] * scale + torch.zeros_like(st["z"]).index_add_(0, dl, p))
        st["msg"].copy_(st["msg"] * scale.unsqueeze(-1)
                        + torch.zeros_like(st["msg"]).index_add_(0, dl, p.unsqueeze(-1) * xs))
        st["m"].copy_(m_new)
