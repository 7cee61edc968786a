"""A study's workers keep ``OMP_NUM_THREADS`` when the user set it (before, every worker was given
``os.cpu_count() // workers`` threads whatever it said), and share the cores this process may use (its CPU
affinity: a container's or ``taskset``'s limit), not the machine's."""

from __future__ import annotations

import os

import pytest

from gradprobe.study import executors
from gradprobe.study.executors import default_workers, usable_cores, worker_threads


@pytest.fixture
def eight_of_sixty_four_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)


def test_usable_cores_follow_the_affinity(eight_of_sixty_four_cores):
    assert usable_cores() == 8 and default_workers(100) == 8 and default_workers(3) == 3 and default_workers(0) == 1


@pytest.mark.parametrize("env, workers, expected", [
    ({}, 2, (4, "cores // workers")), ({}, 16, (1, "cores // workers")),
    ({"OMP_NUM_THREADS": "1"}, 2, (1, "OMP_NUM_THREADS")), ({"OMP_NUM_THREADS": " 3 "}, 8, (3, "OMP_NUM_THREADS")),
    ({"OMP_NUM_THREADS": "0"}, 2, (4, "cores // workers")), ({"OMP_NUM_THREADS": "4,2"}, 2, (4, "cores // workers")),
    ({"OMP_NUM_THREADS": "x"}, 4, (2, "cores // workers")), ({"OMP_NUM_THREADS": ""}, 1, (8, "cores // workers")),
    ({"OMP_NUM_THREADS": "8"}, 2, (8, "OMP_NUM_THREADS")),
    ({"OMP_NUM_THREADS": "16"}, 1, (8, "OMP_NUM_THREADS=16 capped at the 8 usable cores"))])
def test_worker_threads(eight_of_sixty_four_cores, env, workers, expected):
    assert worker_threads(workers, env) == expected


def test_a_ray_cluster_keeps_omp_num_threads_uncapped(eight_of_sixty_four_cores):
    """The cluster's nodes may have more cores than this machine (a reviewer: a 4-core head cut 16 threads to 4)."""
    assert worker_threads(2, {"OMP_NUM_THREADS": "16"}, cluster=True) == (16, "OMP_NUM_THREADS")
    assert worker_threads(2, {}, cluster=True) == (4, "cores // workers")


def test_worker_threads_reads_the_environment(eight_of_sixty_four_cores, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert worker_threads(2) == (1, "OMP_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert worker_threads(2) == (4, "cores // workers")


def test_no_affinity_falls_back_to_the_cpu_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert executors.usable_cores() == 6 and worker_threads(4, {}) == (1, "cores // workers")
