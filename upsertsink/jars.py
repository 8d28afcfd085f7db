"""Locate (and, with ``ensure``, fetch) the Delta Lake JARs that Spark needs, without Ivy.

Spark's own ``spark.jars.packages`` resolution goes through Ivy, which on a machine with a partly filled
``~/.m2`` finds a POM without its JAR and fails. upsertsink instead asks Maven for exactly the two JARs
Delta needs at run time (``delta-spark`` and ``delta-storage``; Spark already ships everything else they
use) and hands their paths to Spark as ``spark.jars``: Spark then starts without any network.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)

SCALA_VERSION = "2.13"


def m2_repository() -> Path:
    """The local Maven repository (``UPSERTSINK_M2_REPO`` or ``~/.m2/repository``)."""
    return Path(os.environ.get("UPSERTSINK_M2_REPO", Path.home() / ".m2" / "repository"))


def delta_artifacts() -> list[tuple[str, str, str]]:
    """(group, artifact, version) of the JARs matching the installed pyspark and delta-spark."""
    import pyspark

    delta_version = version("delta-spark")
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return [
        ("io.delta", f"delta-spark_{spark_minor}_{SCALA_VERSION}", delta_version),
        ("io.delta", "delta-storage", delta_version),
    ]


def jar_path(group: str, artifact: str, ver: str) -> Path:
    return m2_repository().joinpath(*group.split("."), artifact, ver, f"{artifact}-{ver}.jar")


def delta_jars() -> list[Path] | None:
    """Paths of the Delta JARs when all are present locally, else None."""
    paths = [jar_path(*a) for a in delta_artifacts()]
    return paths if all(p.is_file() for p in paths) else None


def ensure() -> list[Path]:
    """Fetch the missing Delta JARs into the local Maven repository with ``mvn dependency:get``."""
    missing = [a for a in delta_artifacts() if not jar_path(*a).is_file()]
    if missing:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                "Maven (mvn) is not installed and the Delta JARs are not in "
                f"{m2_repository()}: install Maven, or set spark.jars yourself."
            )
        for group, artifact, ver in missing:
            coords = f"{group}:{artifact}:{ver}"
            print(f"fetching {coords} with Maven", file=sys.stderr)
            cmd = [mvn, "-q", "-B", "dependency:get", f"-Dartifact={coords}", "-Dtransitive=false"]
            if os.environ.get("UPSERTSINK_M2_REPO"):
                cmd.append(f"-Dmaven.repo.local={m2_repository()}")
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
            if proc.returncode != 0 or not jar_path(group, artifact, ver).is_file():
                raise RuntimeError(f"could not fetch {coords} with Maven:\n{proc.stdout}{proc.stderr}")
    return [jar_path(*a) for a in delta_artifacts()]


if __name__ == "__main__":
    if sys.argv[1:] == ["ensure"]:
        for p in ensure():
            print(f"delta jar: {p}")
    else:
        print("usage: python -m upsertsink.jars ensure", file=sys.stderr)
        sys.exit(2)
