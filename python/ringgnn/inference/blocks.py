"""The ``blocks`` strategy (``strategy="blocks"``): all sources of edge-bounded
destination blocks gathered and the PyG layer called on them (hubs in chunks, combined exactly);
the second implementation the tests hold the grid to. Imports PyTorch."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .._core import InputError
from .graph import Block, blocks


def _local(block: Block, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(the block's nodes, its destinations first; each edge's source as a local id)."""
    a, b = block.a, block.b
    inside = (ids >= a) & (ids < b)
    others = np.unique(ids[~inside])
    nodes = np.concatenate([np.arange(a, b, dtype=np.int64), others])
    local = np.where(inside, ids - a, (b - a) + np.searchsorted(others, ids))
    return nodes, local.astype(np.int64)


class BlocksStrategy:
    """The ``blocks`` strategy's methods of the engine (see the module's docstring)."""

    def _dst_of(self, blk: Block) -> np.ndarray:
        if blk.parts > 1:
            return np.full(blk.hi - blk.lo, blk.a, dtype=np.int64)
        deg = np.diff(self.graph.indptr[blk.a:blk.b + 1])
        return np.repeat(np.arange(blk.a, blk.b, dtype=np.int64), deg)

    def _conv(self, k: int, blk: Block, x_nodes: Any, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray) -> Any:
        """Layer ``k``'s outputs of one block's destinations (a hub chunk's part: :meth:`_combine`)."""
        import torch

        conv, kind = self.net.convs[k], self.ckpt.kind
        n_dst = blk.b - blk.a
        ei = torch.from_numpy(np.stack([src, dst - blk.a]))
        if kind == "sage":
            return conv((x_nodes, x_nodes[:n_dst]), ei)
        keep = src != (dst - blk.a)  # stored self loops out; one per node is added below
        if kind == "gcn":
            s, d = src[keep], dst[keep] - blk.a
            loops = np.arange(n_dst, dtype=np.int64) if blk.part == 0 else np.empty(0, np.int64)
            s, d = np.concatenate([s, loops]), np.concatenate([d, loops])
            w = self.dinv[nodes[s]] * self.dinv[nodes[d]]
            normalize = conv.normalize
            conv.normalize = False
            try:
                out = conv(x_nodes, torch.from_numpy(np.stack([s, d])), torch.from_numpy(w))[:n_dst]
            finally:
                conv.normalize = normalize
            return out if blk.parts == 1 else out - (conv.bias if conv.bias is not None else 0)
        # GAT
        if blk.parts == 1:
            return conv((x_nodes, x_nodes[:n_dst]), torch.from_numpy(np.stack([src[keep], dst[keep] - blk.a])))
        return self._gat_chunk(conv, blk, x_nodes, src[keep])

    def _gat_chunk(self, conv, blk: Block, x_nodes, src):
        """A hub chunk's GAT attention: (log-sum-exp per head, weighted sum of its messages)."""
        import torch
        import torch.nn.functional as F

        H, C = conv.heads, conv.out_channels
        lin = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_src
        lin_dst = conv.lin if getattr(conv, "lin", None) is not None else conv.lin_dst
        xs = lin(x_nodes).view(-1, H, C)
        xd = lin_dst(x_nodes[:1]).view(-1, H, C)
        a_src = (xs * conv.att_src).sum(-1)  # [n, H]
        a_dst = (xd * conv.att_dst).sum(-1)  # [1, H]
        idx = torch.from_numpy(src)
        if blk.part == 0:  # the self loop, once
            idx = torch.cat([idx, torch.zeros(1, dtype=torch.int64)])
        e = F.leaky_relu(a_src[idx] + a_dst, conv.negative_slope)  # [m, H]
        lse = torch.logsumexp(e, dim=0)  # [H]
        w = torch.exp(e - lse)  # [m, H]
        msg = (w.unsqueeze(-1) * xs[idx]).sum(0)  # [H, C]
        return lse, msg

    def _combine(self, k: int, parts: List[Any], blk: Block) -> Any:
        """A hub's output from its chunks' parts."""
        import torch

        conv, kind = self.net.convs[k], self.ckpt.kind
        if kind == "sage" and str(getattr(conv, "aggr", "mean")) != "mean":
            raise InputError(f"{self.ckpt.path}: SAGEConv(aggr={conv.aggr!r}) on a node with more in-edges than a "
                             "block is not supported by strategy='blocks'; use the grid")
        if kind == "sage":  # chunk means weighted by their sizes (the root term weighs 1 in all)
            deg = sum(n for _, n in parts)
            return sum(out * (n / deg) for out, n in parts)
        if kind == "gcn":
            out = sum(p for p in parts)
            return out + (conv.bias if conv.bias is not None else 0)
        lses = torch.stack([p[0] for p in parts])  # [parts, H]
        total = torch.logsumexp(lses, dim=0)
        msg = sum(torch.exp(l - total).unsqueeze(-1) * m for l, m in parts)  # [H, C]
        out = msg.reshape(1, -1) if conv.concat else msg.mean(0, keepdim=True)
        if conv.bias is not None:
            out = out + conv.bias
        return out

    def layer(self, k: int, reader: Any, writer: Callable[[int, np.ndarray], None],
              wanted: Optional[np.ndarray] = None, activate: bool = True) -> None:
        """Layer ``k`` for every node (or the blocks holding ``wanted`` nodes); ``writer(a, rows)``
        receives rows ``a..`` in node order."""
        import torch

        g = self.graph
        hub_parts: List[Any] = []
        for blk in blocks(g.indptr, self.block_edges, self.block_nodes, wanted):
            ids = g.edges(blk.lo, blk.hi)
            dst = self._dst_of(blk)
            nodes, src = _local(blk, ids)
            x_nodes = torch.from_numpy(reader.gather(nodes))
            out = self._conv(k, blk, x_nodes, nodes, src, dst)
            if blk.parts > 1:
                hub_parts.append((out, blk.hi - blk.lo) if self.ckpt.kind == "sage" else out)
                if blk.part < blk.parts - 1:
                    continue
                out = self._combine(k, hub_parts, blk)
                hub_parts = []
            out = out.numpy()
            if activate:
                out = self.dense.after(k, out)
            writer(blk.a, out)
            self._done(blk.a, blk.b)
