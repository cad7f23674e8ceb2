"""Issue 20, case 2: the default budget sees a memory cgroup (v1 or v2), so a command run without
``--memory`` inside a container's limit stays within it instead of being OOM-killed. The fake
cgroup trees are tested in Rust (``budget/cgroup.rs``); here once for real, under the machine's
``memcap`` tool (a v1 or v2 cgroup made for the command), where it is usable."""

import os
import subprocess
import sys

import pytest

MEMCAP = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "tools", "memcap")


def _under_memcap(size, code):
    if not os.path.exists(MEMCAP) or os.geteuid() != 0:
        pytest.skip("needs root and ../shared/tools/memcap")
    r = subprocess.run(["bash", MEMCAP, size, "--", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 2 and "memcap:" in r.stderr:
        pytest.skip(f"memcap cannot make a cgroup here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_default_budget_stays_under_a_real_cgroup_limit():
    code = "import ringgnn._core as c; print(c.default_budget())"
    free = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout)
    capped = int(_under_memcap("200M", code))
    # 7/8 of what the 200 MiB cap leaves (the interpreter holds some of it), never half the host.
    assert 0 < capped <= 200 * 2**20 * 7 // 8, capped
    assert capped > 100 * 2**20, "most of the room, not half of it"
    assert free > capped or free < 200 * 2**20


def test_commands_default_to_the_cgroup_budget(tmp_path):
    # A build without --memory under a 300 MiB cap: its default (1G elsewhere) follows the cap.
    code = ("import ringgnn._options as o; import ringgnn.data.build as b; "
            "print(b._memory(None), o.default_memory(cap=1 << 30, held=0))")
    build, default = map(int, _under_memcap("300M", code).split())
    # The two calls read the cgroup's usage a moment apart: equal up to what the process
    # allocated in between.
    assert abs(build - default) < 1 << 20 and build < 300 * 2**20 * 7 // 8, (build, default)
