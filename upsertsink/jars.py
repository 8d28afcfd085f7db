"""Locate (and, with ``ensure``, fetch) the JARs that Spark needs, without Ivy.

Spark's own ``spark.jars.packages`` resolution goes through Ivy, which on a machine with a partly filled
``~/.m2`` finds a POM without its JAR and fails. upsertsink instead asks Maven for exactly the JARs it needs
and hands their paths to Spark: Spark then starts without any network.

- Delta (always): ``delta-spark`` and ``delta-storage``; Spark already ships everything else they use.
- S3 through ``s3a://`` (on request, ``--s3a``): ``hadoop-aws`` of the Hadoop version bundled in pyspark
  (read from ``pyspark/jars/hadoop-client-api-*.jar``), the AWS SDK v2 ``bundle`` and the
  ``analyticsaccelerator-s3`` library at the versions that Hadoop release declares in its own POM, and
  upsertsink's ``S3ConditionalPutLogStore`` (compiled here from ``upsertsink/jvm`` with ``javac``): the Delta
  LogStore that commits with S3 conditional writes, the protocol deltalake (delta-rs) uses too.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from importlib.metadata import version
from pathlib import Path

from upsertsink.storage import LOGSTORE_CLASS

__all__ = ["LOGSTORE_CLASS", "build_logstore_jar", "delta_jars", "ensure", "s3a_jars"]

log = logging.getLogger(__name__)

SCALA_VERSION = "2.13"
_LOGSTORE_SOURCE = Path(__file__).with_name("jvm") / "S3ConditionalPutLogStore.java"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}

Artifact = tuple[str, str, str]  # (group, artifact, version)


def m2_repository() -> Path:
    """The local Maven repository (``UPSERTSINK_M2_REPO`` or ``~/.m2/repository``)."""
    return Path(os.environ.get("UPSERTSINK_M2_REPO", Path.home() / ".m2" / "repository"))


def cache_dir() -> Path:
    """Where JARs built here are kept (``UPSERTSINK_CACHE`` or ``~/.cache/upsertsink``)."""
    return Path(os.environ.get("UPSERTSINK_CACHE", Path.home() / ".cache" / "upsertsink"))


def delta_artifacts() -> list[Artifact]:
    """(group, artifact, version) of the JARs matching the installed pyspark and delta-spark."""
    import pyspark

    delta_version = version("delta-spark")
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return [
        ("io.delta", f"delta-spark_{spark_minor}_{SCALA_VERSION}", delta_version),
        ("io.delta", "delta-storage", delta_version),
    ]


def jar_path(group: str, artifact: str, ver: str, ext: str = "jar") -> Path:
    return m2_repository().joinpath(*group.split("."), artifact, ver, f"{artifact}-{ver}.{ext}")


def delta_jars() -> list[Path] | None:
    """Paths of the Delta JARs when all are present locally, else None."""
    paths = [jar_path(*a) for a in delta_artifacts()]
    return paths if all(p.is_file() for p in paths) else None


# ---------------------------------------------------------------- S3 (s3a://)


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_version() -> str:
    """The Hadoop version pyspark bundles, from its ``hadoop-client-api-<version>.jar``."""
    for jar in sorted(pyspark_jars_dir().glob("hadoop-client-api-*.jar")):
        match = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise RuntimeError(f"no hadoop-client-api-*.jar in {pyspark_jars_dir()}: is pyspark installed whole?")


def _pom_property(pom: Path, name: str) -> str | None:
    node = ET.parse(pom).getroot().find(f"m:properties/m:{name}", _POM_NS)
    return node.text.strip() if node is not None and node.text else None


def s3a_artifacts(fetch: bool = False) -> list[Artifact] | None:
    """hadoop-aws and the AWS SDK pieces it declares, for pyspark's Hadoop; None if the POM is not local.

    The SDK versions come from the ``hadoop-project`` POM of that Hadoop release (the versions Hadoop was
    built and tested with); with ``fetch`` the POM is fetched with Maven when missing.
    """
    hv = hadoop_version()
    project = ("org.apache.hadoop", "hadoop-project", hv)
    pom = jar_path(*project, ext="pom")
    if not pom.is_file():
        if not fetch:
            return None
        _mvn_get(project, packaging="pom")
    sdk = _pom_property(pom, "aws-java-sdk-v2.version")
    accel = _pom_property(pom, "amazon-s3-analyticsaccelerator-s3.version")
    if not sdk:
        raise RuntimeError(f"{pom} names no aws-java-sdk-v2.version: cannot pick the AWS SDK for Hadoop {hv}")
    found = [("org.apache.hadoop", "hadoop-aws", hv), ("software.amazon.awssdk", "bundle", sdk)]
    if accel:
        found.append(("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", accel))
    return found


def _logstore_inputs() -> list[Path]:
    delta = delta_jars()
    if delta is None:
        raise RuntimeError("the Delta JARs are missing: run `python -m upsertsink.jars ensure` first")
    storage = [p for p in delta if p.name.startswith("delta-storage-")]
    hadoop = sorted(pyspark_jars_dir().glob("hadoop-client-api-*.jar"))
    return storage + hadoop


def logstore_jar_path() -> Path:
    """Where the LogStore JAR for this source, Delta and Hadoop lives (it may not be built yet)."""
    digest = hashlib.sha256(_LOGSTORE_SOURCE.read_bytes())
    digest.update(f"{version('delta-spark')}|{hadoop_version()}".encode())
    return cache_dir() / f"upsertsink-delta-logstore-{digest.hexdigest()[:12]}.jar"


def build_logstore_jar() -> Path:
    """Compile ``S3ConditionalPutLogStore`` with ``javac`` into a JAR in the cache (once per version)."""
    target = logstore_jar_path()
    if target.is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError(
            "javac (a JDK 17 or later) is needed once to build upsertsink's S3 LogStore for delta-spark; "
            "install a JDK (e.g. apt-get install openjdk-17-jdk-headless)"
        )
    classpath = os.pathsep.join(str(p) for p in _logstore_inputs())
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "classes"
        cmd = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(out), str(_LOGSTORE_SOURCE)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac could not build {_LOGSTORE_SOURCE.name}:\n{proc.stdout}{proc.stderr}")
        partial = target.with_suffix(".jar.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: upsertsink\n\n")
            for cls in sorted(out.rglob("*.class")):
                jar.write(cls, cls.relative_to(out).as_posix())
        partial.replace(target)
    log.info("built %s", target)
    return target


def s3a_jars() -> list[Path] | None:
    """hadoop-aws, the AWS SDK and the LogStore JAR when all are present locally, else None."""
    found = s3a_artifacts()
    if found is None:
        return None
    paths = [jar_path(*a) for a in found] + [logstore_jar_path()]
    return paths if all(p.is_file() for p in paths) else None


# ---------------------------------------------------------------- fetching


def _mvn_get(artifact: Artifact, packaging: str = "jar") -> None:
    mvn = shutil.which("mvn")
    group, name, ver = artifact
    if mvn is None:
        raise RuntimeError(
            f"Maven (mvn) is not installed and {group}:{name}:{ver} is not in {m2_repository()}: "
            "install Maven, or set spark.jars yourself."
        )
    coords = f"{group}:{name}:{ver}" + (f":{packaging}" if packaging != "jar" else "")
    print(f"fetching {coords} with Maven", file=sys.stderr)
    cmd = [mvn, "-q", "-B", "dependency:get", f"-Dartifact={coords}", "-Dtransitive=false"]
    if os.environ.get("UPSERTSINK_M2_REPO"):
        cmd.append(f"-Dmaven.repo.local={m2_repository()}")
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0 or not jar_path(group, name, ver, ext=packaging).is_file():
        raise RuntimeError(f"could not fetch {coords} with Maven:\n{proc.stdout}{proc.stderr}")


def ensure(s3a: bool = False) -> list[Path]:
    """Fetch the missing Delta JARs (and with ``s3a`` the S3 ones) into the local Maven repository.

    Returns the Delta JAR paths, followed by the S3 ones when ``s3a`` is true.
    """
    for artifact in delta_artifacts():
        if not jar_path(*artifact).is_file():
            _mvn_get(artifact)
    paths = [jar_path(*a) for a in delta_artifacts()]
    if s3a:
        found = s3a_artifacts(fetch=True) or []
        for artifact in found:
            if not jar_path(*artifact).is_file():
                _mvn_get(artifact)
        paths += [jar_path(*a) for a in found] + [build_logstore_jar()]
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m upsertsink.jars")
    parser.add_argument("command", choices=["ensure", "paths"], help="ensure: fetch what is missing; "
                        "paths: print the local paths (fetching nothing), one a line")
    parser.add_argument("--s3a", action="store_true", help="also hadoop-aws, the AWS SDK and the S3 LogStore")
    args = parser.parse_args(argv)
    if args.command == "ensure":
        paths = ensure(s3a=args.s3a)
        for p in paths[: len(delta_artifacts())]:
            print(f"delta jar: {p}")
        for p in paths[len(delta_artifacts()) :]:
            print(f"s3a jar: {p}")
        return 0
    delta = delta_jars()
    s3 = s3a_jars() if args.s3a else []
    if delta is None or s3 is None:
        print("upsertsink: error: JARs missing; run `python -m upsertsink.jars ensure"
              + (" --s3a" if args.s3a else "") + "`", file=sys.stderr)
        return 2
    for p in [*delta, *s3]:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
