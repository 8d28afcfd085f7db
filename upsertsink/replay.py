"""Replay check: run a job several times on the same inputs, vary what must not matter, diff by key.

Run 1 is the baseline: the inputs as given and the session's ``spark.sql.shuffle.partitions``. Every later
run uses another shuffle partition count, and its inputs are repartitioned to another partition count with
the rows in another (seeded random) order inside each partition. AQE partition coalescing is switched off
during the runs so the partition counts really change. Each run's output is materialized (local
checkpoint) while its settings are active, then runs 2..N are each diffed against run 1 by key.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from upsertsink import io
from upsertsink.diffing import DiffResult, diff, render
from upsertsink.diffing.render import Styler
from upsertsink.errors import InvalidInputError, option

log = logging.getLogger(__name__)

# shuffle partitions and input partitions of runs 2, 3, ... (cycled); run 1 keeps the session's settings
_SHUFFLE_PARTITIONS = (7, 1, 13, 3, 29, 5)
_INPUT_PARTITIONS = (3, 1, 5, 2, 7, 4)


@dataclass
class RunSettings:
    """What one run of the job was given."""

    run: int
    shuffle_partitions: int
    input_partitions: int | None  # None: the inputs as given
    seed: int | None  # row order seed, None: the inputs as given

    def describe(self) -> str:
        """A short human description, e.g. ``run 2 (shuffle partitions 7, inputs in 3 partitions, ...)``."""
        if self.input_partitions is None:
            return f"run {self.run} (shuffle partitions {self.shuffle_partitions}, inputs as given)"
        return (
            f"run {self.run} (shuffle partitions {self.shuffle_partitions}, inputs in "
            f"{self.input_partitions} partitions, row order seed {self.seed})"
        )


@dataclass
class ReplayResult:
    """The outcome of a replay check: the settings of every run and each later run's diff against run 1."""

    keys: list[str]
    settings: list[RunSettings]
    diffs: list[DiffResult] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        """True when every run produced the same rows by key as run 1."""
        return all(d.equal for d in self.diffs)

    @property
    def runs(self) -> int:
        """How many times the job ran."""
        return len(self.settings)

    def format_text(self, limit: int = 10, style: Styler | None = None) -> str:
        """A plain-text report: one line per run, and the differences of the runs that differ."""
        lines = [f"replay check keyed by {', '.join(self.keys)}: {self.runs} runs"]
        lines.append(f"  {self.settings[0].describe()}: baseline, {self.diffs[0].rows_left} rows")
        for setting, d in zip(self.settings[1:], self.diffs):
            lines.append(f"  {setting.describe()}: {'same as run 1' if d.equal else 'DIFFERS from run 1'}")
        for setting, d in zip(self.settings[1:], self.diffs):
            if not d.equal:
                lines.append(f"run {setting.run} vs run 1 ({setting.describe()}):")
                lines.extend("  " + line for line in render(d, limit, style).splitlines())
        if self.equal:
            lines.append("all runs equal")
        return "\n".join(lines)

    def to_dict(self, limit: int = 10) -> dict[str, Any]:
        """A JSON-ready dict: ``equal``, ``runs`` (settings) and the diff of every later run."""
        return {
            "equal": self.equal,
            "keys": list(self.keys),
            "runs": [vars(s) for s in self.settings],
            "diffs": [{"run": s.run, **d.to_dict(limit)} for s, d in zip(self.settings[1:], self.diffs)],
        }


def load_job(target: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` (the current directory is put on ``sys.path`` first)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidInputError(f"job {target!r} must be MODULE:FUNCTION, e.g. jobs.orders:build")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInputError(f"job {target!r}: cannot import module {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidInputError(f"job {target!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvalidInputError(f"job {target!r} is not callable")
    return obj


def read_input(spark: Any, spec: str, what: str = "input", csv: Any = None) -> Any:
    """Read ``PATH`` (``PATH@N``) as a Spark DataFrame: a Delta table, a parquet/csv/json file or folder (csv
    files typed by ``csv``, a ``typed_csv.CsvOptions``, when given)."""
    return io.read_spark(spark, io.resolve_path(spec, what, csv))


def _settings(runs: int, base_partitions: int) -> list[RunSettings]:
    out = [RunSettings(1, base_partitions, None, None)]
    for k in range(1, runs):
        shuffle = _SHUFFLE_PARTITIONS[(k - 1) % len(_SHUFFLE_PARTITIONS)]
        if shuffle == base_partitions:
            shuffle += 1
        parts = _INPUT_PARTITIONS[(k - 1) % len(_INPUT_PARTITIONS)]
        out.append(RunSettings(k + 1, shuffle, parts, 1000 + k))
    return out


def _vary(df: Any, setting: RunSettings) -> Any:
    """The same rows in ``input_partitions`` partitions, each in a seeded random order."""
    if setting.input_partitions is None or not io.is_spark_frame(df):
        return df
    from upsertsink.sparkapi import F

    order = "__upsertsink_replay_order"
    return (
        df.repartition(setting.input_partitions)
        .withColumn(order, F.rand(setting.seed))
        .sortWithinPartitions(order)
        .drop(order)
    )


def replay_check(
    job: Callable[..., Any],
    spark: Any,
    keys: str | Sequence[str],
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    runs: int = 2,
    progress: Callable[[str], None] | None = None,
    **diff_options: Any,
) -> ReplayResult:
    """Run ``job(spark, *args, **kwargs)`` ``runs`` times with varied partitioning and diff by ``keys``."""
    if not isinstance(runs, int) or runs < 2:
        raise InvalidInputError(f"{option('runs')} must be an int >= 2, got {runs!r}")
    key_list = [keys] if isinstance(keys, str) else list(keys)
    kwargs = dict(kwargs or {})
    say = progress or (lambda _msg: None)
    conf = spark.conf
    names = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.coalescePartitions.enabled")
    saved = {n: conf.get(n, None) for n in names}
    settings = _settings(runs, int(saved[names[0]] or 200))
    outputs = []
    try:
        conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
        for setting in settings:
            say(f"running the job: {setting.describe()}")
            conf.set("spark.sql.shuffle.partitions", str(setting.shuffle_partitions))
            run_args = [_vary(a, setting) for a in args]
            run_kwargs = {k: _vary(v, setting) for k, v in kwargs.items()}
            out = job(spark, *run_args, **run_kwargs)
            if not io.is_spark_frame(out):
                raise InvalidInputError(
                    f"the job must return a Spark DataFrame, it returned {type(out).__name__}"
                )
            outputs.append(out.localCheckpoint(eager=True))
            log.debug("%s done", setting.describe())
    finally:
        for name, value in saved.items():
            if value is None:
                conf.unset(name)
            else:
                conf.set(name, value)
    result = ReplayResult(key_list, settings)
    for setting, out in zip(settings[1:], outputs[1:]):
        say(f"comparing run {setting.run} with run 1")
        d = diff(outputs[0], out, key_list, engine="spark", **diff_options)
        d.left_label, d.right_label = "run 1", f"run {setting.run}"
        result.diffs.append(d)
    return result
