"""Embeddings as a dataset's features (``ringgnn embed RUN --attach DS --name NAME``): a copy of
``DS`` beside it, hard-linked, with the run's embeddings as features. docs/INFERENCE.md."""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any, Callable, Dict, Optional

import numpy as np

from .. import _core, _options
from .._core import InputError
from .._files import os_errors, temporary
from ..data.build import read_manifest
from ..data.dataset import Dataset, open_homogeneous
from ..models.checkpoints import is_hetero_link_run, is_hetero_run, read_checkpoint
from .hetero import infer_hetero
from .rows import _STORED, RowFileWriter, _layout, check_output
from .run import LayerwiseInference, embedding_layer, open_run

#: A new dataset's name: a plain directory name.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def destination(target: str, name: str) -> str:
    """Where ``--name NAME`` puts the copy of dataset ``target``: beside it."""
    if not NAME.match(name or ""):
        raise InputError(f"--name {name!r}: give a plain directory name (letters, digits, '_', '.', '-'), "
                         "the new dataset goes beside --attach's")
    dest = os.path.join(os.path.dirname(os.path.abspath(target)), name)
    if os.path.lexists(dest):
        raise InputError(f"--name {name}: {dest} already exists; choose another name or remove it")
    return dest


def attach_embeddings(run_dir: str, target: str, name: str, *, dataset: Optional[str] = None,
                      layer: Optional[int] = None, dtype: str = "f32", memory: Optional[int] = None,
                      backend: str = "auto", direct: bool = False, quiet: bool = True,
                      hidden_dtype: Optional[str] = None, device: Optional[str] = None,
                      log: Callable[[str], None] = lambda s: None, at: Optional[int] = None,
                      node_type: Optional[str] = None) -> Dict[str, Any]:
    """Write run ``run_dir``'s embeddings (layer ``layer``; graph as of ``at``)
    as the features of a copy of dataset ``target`` named ``name``; returns a summary. Of a typed
    run, the rows of ``node_type`` (default the target) become that type's features."""
    check_output(None, dtype)
    read = read_checkpoint(run_dir, "RUN_DIR", arrays=True)
    if is_hetero_run(read) or is_hetero_link_run(read):
        return _attach_typed(run_dir, target, name, read, dataset=dataset, layer=layer, dtype=dtype, memory=memory,
                             backend=backend, direct=direct, quiet=quiet, hidden_dtype=hidden_dtype, device=device,
                             log=log, at=at, node_type=node_type)
    if node_type is not None:
        raise InputError(f"--type {node_type}: names a node type of a heterogeneous run; {read[0]} is a homogeneous "
                         "run: leave --type out")
    src, ckpt = open_run(run_dir, dataset, arrays=True)
    upto = embedding_layer(ckpt, layer)
    tgt = open_homogeneous(target, "--attach")
    _same_count(target, tgt.num_nodes, src.path, src.num_nodes, "node")
    dest = destination(target, name)
    run = LayerwiseInference(src, ckpt, memory=_options.size(memory, "memory"), backend=backend, direct=direct,
                             quiet=quiet, log=log, hidden_dtype=hidden_dtype, device=device,
                             work_dir=os.path.dirname(dest), at=at)
    try:
        width = run.widths[upto]
        made = _write_copy(run_dir, tgt, dest, name, None, width, dtype,
                           lambda put: run.run(upto, None, put, activate_last=True),
                           dict(checkpoint=ckpt.path, layer=upto, hidden_dtype=run.hidden_dtype,
                                **({"at": run.times["at"]} if run.times else {})))
    finally:
        run.close()
    return dict(made, layer=upto, dim=width, plan=run.plan, **run.times, **run.stats)


def _attach_typed(run_dir: str, target: str, name: str, read: Any, *, node_type: Optional[str],
                  device: Optional[str], **opts: Any) -> Dict[str, Any]:
    """:func:`attach_embeddings` of a typed run: ``node_type``'s rows into the copy's feature file."""
    if device not in (None, "cpu"):
        raise InputError(f"--device {device}: a heterogeneous run's inference runs on the CPU; leave --device out")
    tgt = Dataset.opened(target)  # a typed dataset, or a homogeneous one (the one-type case)
    dest = destination(target, name)
    dtype = opts.pop("dtype")
    scratch = temporary(os.path.dirname(dest), f"{name}.rows", directory=True)
    try:
        rows_path = os.path.join(scratch.path, "rows.npy")
        s = infer_hetero(run_dir, opts.pop("dataset"), node_type=node_type, output="embeddings", out=rows_path,
                         read=read, **opts)
        t = s["type"]
        if tgt.is_hetero:
            if t not in tgt.node_types:
                raise InputError(f"--attach {target}: it has no node type '{t}' (it has: {', '.join(tgt.node_types)}); "
                                 "attach the embeddings to a dataset of the run's node types")
            count = tgt.num_nodes_dict[t]
        else:
            count = tgt.num_nodes
        _same_count(target, count, s["dataset"], s["rows"], f"'{t}' node" if tgt.is_hetero else "node")
        rows = np.load(rows_path, mmap_mode="r")

        def fill(put: Callable[[int, np.ndarray], None]) -> None:
            for a in range(0, len(rows), BLOCK_ROWS):
                put(a, np.asarray(rows[a:a + BLOCK_ROWS], dtype=np.float32))

        made = _write_copy(run_dir, tgt, dest, name, t if tgt.is_hetero else None, s["dim"], dtype, fill,
                           dict(checkpoint=s["checkpoint"], layer=s["layer"], type=t,
                                **({"at": s["at"]} if "at" in s else {})))
    finally:
        scratch.close()
    # The engine's report (plan, layers, bytes, times) as `embed` gives it; not its output file's.
    engine = {k: v for k, v in s.items() if k not in made and k not in ("out", "node_ids", "output", "seconds")}
    return dict(made, **engine)


#: Rows of a typed run's embeddings copied into the feature file at a time (bounded memory).
BLOCK_ROWS = 1 << 16


def _same_count(target: str, have: int, source: str, rows: int, what: str) -> None:
    if have != rows:
        raise InputError(f"--attach {target}: it has {have:,} {what}s, but the embeddings have one row per {what} of "
                         f"{source} ({rows:,}); attach them to a dataset of the same nodes")


def _write_copy(run_dir: str, tgt: Any, dest: str, name: str, node_type: Optional[str], width: int, dtype: str,
                fill: Callable[[Callable[[int, np.ndarray], None]], None], source: Dict[str, Any]) -> Dict[str, Any]:
    """The copy of ``tgt`` at ``dest`` with ``fill``'s rows as (``node_type``'s) features; its summary."""
    manifest = read_manifest(tgt.path)
    key = "features" if node_type is None else f"node.{node_type}.features"
    old = manifest["files"].get(key)
    if old is not None:
        fname = old["path"]
    elif node_type is None:
        fname = "features.bin"
    else:
        fname = f"type{sorted(manifest['node_types']).index(node_type)}_features.bin"  # FORMAT.md's naming
    scratch = temporary(os.path.dirname(dest), name, directory=True)
    try:
        for k, entry in manifest["files"].items():
            if k != key:
                _link_or_copy(os.path.join(tgt.path, entry["path"]), os.path.join(scratch.path, entry["path"]))
        writer = RowFileWriter(os.path.join(scratch.path, fname), width, dtype)
        path = writer.fill(fill)
        size, crc = _core.file_crc32c(path)
        row, per_page = _layout(width, _STORED[dtype].itemsize)
        n = tgt.num_nodes if node_type is None else tgt.num_nodes_dict[node_type]
        last = n - 1
        offset = (last // per_page) * 4096 + (last % per_page) * row if per_page else last * row
        payload = 0 if n == 0 else offset + row  # FORMAT.md: row_offset(V - 1) + row_bytes
        features = dict(dim=width, dtype=dtype, row_bytes=row, rows_per_page=per_page)
        (manifest if node_type is None else manifest["node_types"][node_type])["features"] = features
        manifest["files"][key] = dict(path=fname, bytes=size, payload_bytes=payload, crc32c=crc)
        manifest["source"] = dict(command="embed --attach", run=os.path.abspath(run_dir), **source,
                                  dataset=os.path.abspath(tgt.path), dataset_source=manifest.get("source"))
        mpath = os.path.join(scratch.path, "manifest.json")
        with os_errors("writing", mpath):
            with open(mpath, "w") as f:
                f.write(json.dumps(manifest, indent=2) + "\n")
                f.flush()
                os.fsync(f.fileno())
        _core.read_manifest(scratch.path)  # the core's checks of the new manifest, before it appears
        with os_errors("creating", dest):
            scratch.commit(dest)
    except BaseException:
        scratch.close()
        raise
    return dict(dataset=dest, attached_to=os.path.abspath(tgt.path), run=os.path.abspath(run_dir), rows=n,
                dtype=dtype, crc32c=crc, bytes=size)


def _link_or_copy(src: str, dst: str) -> None:
    """``dst`` as a hard link to ``src`` (the same bytes, no space), else a copy."""
    with os_errors("linking", dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)

