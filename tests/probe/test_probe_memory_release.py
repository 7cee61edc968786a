"""gradprobe.memory.release_memory: freed heap pages go back to the OS (issue 14)."""

import sys

import torch

from gradprobe import memory


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def test_freed_heap_blocks_leave_the_resident_set():
    # 3000 blocks of 64 KiB (under glibc's initial 128 KiB mmap threshold: carved from the heap); the
    # last one stays alive, so the heap's top is not free and glibc keeps the others' pages after free
    glibc = sys.platform.startswith("linux") and memory._malloc_trim() is not None
    if not glibc:  # macOS, musl, Windows: the documented no-op (checked here instead of skipped)
        assert memory.release_memory() is False
        return
    blocks = [torch.ones(16 * 1024) for _ in range(3000)]  # 3000 x 64 KiB = 197 MB, written (resident)
    keep = blocks[-1]
    del blocks
    before = _rss_bytes()
    assert memory.release_memory() is True
    after = _rss_bytes()
    assert before - after > 100e6, f"RSS {before / 1e6:.0f} MB -> {after / 1e6:.0f} MB"
    assert float(keep.sum()) == 16 * 1024  # live data untouched


def test_release_memory_is_a_no_op_without_glibc(monkeypatch):
    monkeypatch.setattr(memory, "_looked_up", True)
    monkeypatch.setattr(memory, "_libc", None)
    assert memory.release_memory() is False
