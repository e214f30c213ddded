"""Issue 38, item 9: the evaluation memory budget honours the memory cgroup, not only the host.

Under a 2.5 GB cgroup on a 24 GB machine the budget was half of the host's `MemAvailable` (12 GB),
so an ALiBi evaluation at 1300x was let through and OOM-killed (exit 137, no result). The cgroup
root is a fake directory here (`LENBENCH_CGROUP_ROOT`), in both layouts; nothing is allocated.
"""

import pytest
import torch

from lenbench.run import memory
from lenbench.run.memory import (
    CGROUP_ENV,
    GIB,
    SAFE_FRACTION,
    available_bytes,
    cgroup_free_bytes,
    memory_budget,
)

CPU = torch.device("cpu")
MIB = 2**20


def v2(root, limit: str, current: int, inactive_file: int | None = None, path: str = ""):
    d = root.joinpath(*[p for p in path.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.max").write_text(f"{limit}\n")
    (d / "memory.current").write_text(f"{current}\n")
    if inactive_file is not None:
        (d / "memory.stat").write_text(f"anon 1\ninactive_file {inactive_file}\nactive_file 5\n")
    return root


def v1(root, limit: int, usage: int, path: str = ""):
    d = (root / "memory").joinpath(*[p for p in path.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (d / "memory.usage_in_bytes").write_text(f"{usage}\n")
    return root


def test_v2_limit_minus_usage(tmp_path):
    v2(tmp_path, str(2560 * MIB), 512 * MIB)
    assert cgroup_free_bytes(tmp_path, "0::/\n") == 2048 * MIB


def test_v2_max_means_no_limit(tmp_path):
    v2(tmp_path, "max", 512 * MIB)
    assert cgroup_free_bytes(tmp_path, "0::/\n") is None


def test_v2_droppable_page_cache_is_not_used_memory(tmp_path):
    v2(tmp_path, str(2560 * MIB), 1536 * MIB, inactive_file=1024 * MIB)
    assert cgroup_free_bytes(tmp_path, "0::/\n") == 2048 * MIB


def test_v1_limit_minus_usage_and_its_no_limit_value(tmp_path):
    v1(tmp_path, 2560 * MIB, 512 * MIB)
    assert cgroup_free_bytes(tmp_path, "4:memory:/\n0::/\n") == 2048 * MIB
    v1(tmp_path, 9223372036854771712, 512 * MIB)  # what v1 writes for "no limit"
    assert cgroup_free_bytes(tmp_path, "4:memory:/\n") is None


def test_the_processs_own_cgroup_and_those_above_it_count_the_least_left(tmp_path):
    v2(tmp_path, "max", 0)
    v2(tmp_path, str(8 * GIB), 7 * GIB, path="/slice")  # 1 GiB left above
    v2(tmp_path, str(4 * GIB), 1 * GIB, path="/slice/job")  # 3 GiB left in its own
    assert cgroup_free_bytes(tmp_path, "0::/slice/job\n") == GIB
    v1(tmp_path, 3 * GIB, 2 * GIB - MIB, path="/runner")
    assert cgroup_free_bytes(tmp_path, "5:cpu,memory:/runner\n") == GIB + MIB  # v1 alone
    assert cgroup_free_bytes(tmp_path, "0::/slice/job\n5:cpu,memory:/runner\n") == GIB  # the least of both


def test_no_cgroup_files_mean_no_cgroup_limit(tmp_path):
    assert cgroup_free_bytes(tmp_path, "0::/\n") is None
    assert cgroup_free_bytes(tmp_path / "absent", "") is None


def test_the_cpu_budget_is_half_the_cgroups_room_under_a_tight_cgroup(tmp_path, monkeypatch):
    """The reported case: host memory is plenty, the cgroup 2.5 GB with 0.5 GB used. This process's
    own cgroup path (/proc/self/cgroup) is not under the fake root, so the walk up reaches its top."""
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    monkeypatch.setenv(CGROUP_ENV, str(v2(tmp_path, str(2560 * MIB), 512 * MIB)))
    monkeypatch.setattr(memory, "host_available_bytes", lambda: 20 * GIB)
    assert available_bytes(CPU) == 2048 * MIB
    assert memory_budget(CPU) == int(2048 * MIB * SAFE_FRACTION)
    assert memory_budget(CPU, 4.0) == 4 * GIB  # the suite's own budget still wins


def test_the_host_bounds_the_budget_when_the_cgroup_is_roomier(tmp_path, monkeypatch):
    monkeypatch.setenv(CGROUP_ENV, str(v2(tmp_path, str(64 * GIB), 0)))
    monkeypatch.setattr(memory, "host_available_bytes", lambda: 3 * GIB)
    assert available_bytes(CPU) == 3 * GIB


@pytest.mark.parametrize("content", ["", "garbage\n", "max\n"])
def test_unreadable_or_odd_files_are_no_limit(tmp_path, content):
    (tmp_path / "memory.max").write_text(content)
    assert cgroup_free_bytes(tmp_path, "0::/\n") is None
