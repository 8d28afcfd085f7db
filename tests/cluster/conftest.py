"""The cluster / object-store suite: a real Spark standalone cluster and moto's S3 server on 127.0.0.1.

Which tests run is chosen with ``UPSERTSINK_CLUSTER_SUITE``:

- ``short`` (default; what the README's ``make test`` runs): one cluster job writing to S3, one object-store
  write per engine, one concurrent pair of writers (one per engine), the server's conditional-write check;
- ``full`` (``make cluster-test``): also the examples on the cluster against ``local[*]``, four mixed-engine
  writers with deletes, a worker killed in the middle of a write, and the LogStore's refusal of a taken commit;
- ``off``: none of it.

The cluster and the server are started once per test run, in a temporary folder, and always stopped.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from clusterlib import lc

SUITE = os.environ.get("UPSERTSINK_CLUSTER_SUITE", "short").strip().lower()


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            keep.append(item)
            continue
        item.add_marker(pytest.mark.cluster)
        full_only = item.get_closest_marker("cluster_full") is not None
        if SUITE == "off" or (full_only and SUITE != "full"):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A master, two workers (1 core, 1 GiB each) and the object store; stopped at the end whatever happens."""
    run_dir = tmp_path_factory.mktemp("cluster")
    try:
        state = lc.start(run_dir, workers=2)
        yield state
    finally:
        lc.stop(run_dir)


@pytest.fixture
def s3_path(cluster):
    """A fresh table URI in the bucket, for one test."""
    return f"s3a://{cluster.bucket}/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def dl_options(cluster) -> dict[str, str]:
    return lc.deltalake_options(cluster)
