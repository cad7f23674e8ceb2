"""Issue 34, item 10: the default memory budget under a small memory cgroup. The default leaves a
floor of the cgroup's room (``budget::KERNEL_FLOOR``) for what the kernel charges to it besides
the process's allocations (the page cache of buffered reads, io_uring's rings and workers, page
tables), and a cgroup too small to run at all is refused at start, naming its limit and the least
budget, instead of the process being OOM-killed. The arithmetic is tested with injected cgroup
rooms in Rust (``budget/tests.rs``); here for real, under the machine's ``memcap`` (a v1 or v2
cgroup made for the command: needs root, skipped elsewhere)."""

import os
import re
import subprocess
import sys

import pytest

MEMCAP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "tools", "memcap")
MIB = 1 << 20
#: ``budget::KERNEL_FLOOR``: the room of a cgroup the default never hands out.
FLOOR = 48 * MIB


def _memcap(size, *cmd, timeout=120):
    if not os.path.exists(MEMCAP) or os.geteuid() != 0:
        pytest.skip("needs root and ../shared/tools/memcap")
    r = subprocess.run(["bash", MEMCAP, size, "--", *cmd], capture_output=True, text=True, timeout=timeout)
    if r.returncode == 2 and "memcap:" in r.stderr:
        pytest.skip(f"memcap cannot make a cgroup here: {r.stderr.strip()}")
    cap = re.search(r"memcap: cap=\d+ bytes peak=(\d+) bytes .*oom_kills=(\d+)", r.stderr)
    assert cap, r.stderr
    assert cap.group(2) == "0", f"OOM-killed: {r.stderr}"
    return r


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "rmat"
    subprocess.run([sys.executable, "-m", "ringgnn", "generate", "rmat", str(path), "--scale", "10",
                    "--edge-factor", "8", "-q"], check=True, capture_output=True)
    return str(path)


def test_the_default_leaves_the_kernel_floor_of_a_cgroups_room():
    code = ("import ringgnn._core as c, ringgnn._options as o; "
            "print(c.default_budget(), open('/proc/self/cgroup').read().count(':'))")
    out = _memcap("200M", sys.executable, "-c", code).stdout.split()
    growth = int(out[0])
    # The interpreter holds some of the 200 MiB; the default grows the process by the rest less
    # the floor (an eighth of the room is less than the floor here).
    assert 100 * MIB < growth <= 200 * MIB - FLOOR, growth


def test_a_cgroup_too_small_is_refused_at_start_naming_its_limit_and_the_least(tiny):
    r = _memcap("64M", sys.executable, "-m", "ringgnn", "sample", tiny, "-q")
    assert r.returncode == 1, r.stderr
    line = r.stderr.splitlines()[0]
    m = re.fullmatch(
        r"ringgnn sample: error: the memory cgroup's limit of 64\.0 MiB is too small for this run: it needs a "
        r"budget of at least (\d+\.\d) MiB, and the default there is (\d+\.\d) MiB \(what the process holds, "
        r"\d+\.\d MiB, plus at most 7/8 of the cgroup's room, keeping 48\.0 MiB of it for the kernel's page cache "
        r"and buffers\); raise the cgroup's limit to at least (\d+\.\d) MiB, or give memory \(--memory\) of at "
        r"least \1 MiB under a limit that leaves 48\.0 MiB more", line)
    assert m, line
    least, default, limit = map(float, m.groups())
    assert default < least < limit and limit > 64, line
    # Just above the limit it names (what the interpreter holds varies a little), the same
    # command runs and is not killed.
    ok = _memcap(f"{int(limit) + 8}M", sys.executable, "-m", "ringgnn", "sample", tiny, "-q", "--json")
    assert ok.returncode == 0, ok.stderr
    assert '"batches": 1' in ok.stdout


def test_a_build_under_a_cgroup_too_small_is_refused_naming_it(tmp_path):
    # The builds' default (1 GiB, or the cgroup's share) goes through the same owner: under a
    # cgroup that leaves less than the builder's least, the refusal names the cgroup, not a
    # --memory the user never gave; nothing is written.
    out = tmp_path / "g"
    r = _memcap("100M", sys.executable, "-m", "ringgnn", "generate", "rmat", str(out), "--scale", "8", "-q")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(
        "ringgnn generate rmat: error: the memory cgroup's limit of 100.0 MiB is too small for this run: it "
        "needs a budget of at least 128.0 MiB, and the default there is "), r.stderr
    assert "raise the cgroup's limit to at least " in r.stderr and "--memory" not in r.stderr.split("(--memory)")[0]
    assert not out.exists()
