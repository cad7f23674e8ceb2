"""The wait policy of the dense library's threads (python/ringgnn/_threads.py): the inference
commands ask for sleeping OpenMP threads before PyTorch is imported, and keep a user's choice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ringgnn._threads import WAIT_POLICY


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != WAIT_POLICY}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True,
                          check=True, timeout=300).stdout.split()


def test_passive_before_torch_is_imported():
    got = _python("import os; from ringgnn._threads import passive_waits; ok = passive_waits(); import torch; "
                  f"print(ok, os.environ['{WAIT_POLICY}'])")
    assert got == ["True", "PASSIVE"]


def test_a_policy_the_user_set_is_kept():
    got = _python("import os; from ringgnn._threads import passive_waits; "
                  f"print(passive_waits(), os.environ['{WAIT_POLICY}'])", **{WAIT_POLICY: "ACTIVE"})
    assert got == ["True", "ACTIVE"]


def test_too_late_once_torch_is_imported():
    got = _python(f"import os, torch; from ringgnn._threads import passive_waits; "
                  f"print(passive_waits(), os.environ.get('{WAIT_POLICY}', 'unset'))")
    assert got == ["False", "unset"]


@pytest.mark.parametrize("command", ["embed", "predict"])
def test_the_inference_commands_set_it_before_torch(command, tmp_path):
    """``ringgnn embed``/``predict`` set the policy first thing: a run directory without a
    checkpoint is refused, with the policy already set for the PyTorch import to come."""
    run = tmp_path / "run"
    run.mkdir()
    code = ("import os, sys; from ringgnn.cli import main; "
            f"main(['{command}', '{run}', '--out', '{tmp_path / 'o.npy'}', '--quiet']); "
            f"print(os.environ.get('{WAIT_POLICY}', 'unset'))")
    assert _python(code)[-1] == "PASSIVE"


def test_one_blas_thread_within_the_block_and_restored_after():
    """numpy's BLAS runs layer-wise inference's dense parts on one thread (small products, one
    per piece), and the process's count comes back after."""
    import numpy as np

    from ringgnn._threads import blas_threads, one_blas_thread

    np.ones((64, 64)) @ np.ones((64, 64))  # OpenBLAS loaded and initialised
    before = blas_threads()
    assert before, "numpy's OpenBLAS is loaded: its thread count is found"
    with one_blas_thread():
        assert blas_threads() == [1] * len(before)
        assert (np.ones((300, 200), np.float32) @ np.ones((200, 100), np.float32) == 200).all()
    assert blas_threads() == before
