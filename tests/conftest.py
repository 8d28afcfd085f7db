"""Fixtures for the sink tests. The `spark` fixture (one SparkSession per run) comes from upsertsink's plugin."""

from __future__ import annotations

import pytest
from sink_helpers import Engine


@pytest.fixture(params=["embedded", "spark"])
def engine(request) -> Engine:
    if request.param == "spark":
        return Engine("spark", request.getfixturevalue("spark"))
    return Engine("embedded")
