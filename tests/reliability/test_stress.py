"""The short versions of the stress runs (``make stress`` runs the long ones): kills and concurrent writers."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from stress import concurrency_run, kill_run


def failure(run) -> str:
    """The run's detail first, in full (a dict message is cut short by pytest's repr)."""
    return f"{run.detail}\n{asdict(run)}"


@pytest.mark.parametrize("seed", [101, 102, 103, 104])
def test_embedded_writer_killed_at_random_moments_converges(tmp_path, seed):
    run = kill_run("embedded", seed, tmp_path, max_delay=3.0)
    assert run.converged, failure(run)


@pytest.mark.spark
@pytest.mark.long  # 107 s on the AMD machine; make stress runs five of these
def test_spark_writer_killed_at_a_random_moment_converges(spark, tmp_path):
    run = kill_run("spark", 201, tmp_path, max_delay=40.0)
    assert run.converged, failure(run)


@pytest.mark.parametrize("shared", [False, True], ids=["own-app-ids", "one-app-id"])
def test_four_concurrent_writers_with_deletes_converge(tmp_path, shared):
    run = concurrency_run(tmp_path, 301, shared, ["embedded"] * 4)
    assert run.converged, failure(run)
    assert set(run.calls) <= {"written", "skipped", "conflict"}


def test_four_writers_of_one_app_sending_in_shuffled_orders_apply_late_batches_once(tmp_path):
    run = concurrency_run(tmp_path, 311, True, ["embedded"] * 4, late=True)
    assert run.converged, failure(run)
    assert set(run.calls) <= {"written", "skipped", "conflict"}


@pytest.mark.spark
@pytest.mark.long  # 137 s on the AMD machine; make stress runs two mixed-engine runs
def test_concurrent_spark_and_embedded_writers_converge(spark, tmp_path):
    run = concurrency_run(tmp_path, 401, False, ["spark", "embedded"])
    assert run.converged, failure(run)
