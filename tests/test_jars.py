"""upsertsink.jars: the S3 JARs match pyspark's Hadoop, and the LogStore JAR is built from the source."""

from __future__ import annotations

import zipfile

from upsertsink import jars


def test_hadoop_aws_matches_the_hadoop_that_pyspark_bundles():
    hv = jars.hadoop_version()
    assert (jars.pyspark_jars_dir() / f"hadoop-client-api-{hv}.jar").is_file()
    found = jars.s3a_artifacts(fetch=True)
    assert found is not None
    assert found[0] == ("org.apache.hadoop", "hadoop-aws", hv)
    sdk = {(g, a): v for g, a, v in found}[("software.amazon.awssdk", "bundle")]
    # the SDK version is the one Hadoop's own POM declares, not a guess
    pom = jars.jar_path("org.apache.hadoop", "hadoop-project", hv, ext="pom").read_text()
    assert f"<aws-java-sdk-v2.version>{sdk}</aws-java-sdk-v2.version>" in pom


def test_ensure_s3a_keeps_the_delta_jars_first_and_builds_the_logstore():
    paths = jars.ensure(s3a=True)
    assert paths[:2] == jars.delta_jars()
    assert all(p.is_file() for p in paths)
    logstore = paths[-1]
    assert logstore == jars.logstore_jar_path()
    with zipfile.ZipFile(logstore) as jar:
        assert "io/upsertsink/delta/S3ConditionalPutLogStore.class" in jar.namelist()
    assert jars.s3a_jars() == paths[2:]
    assert jars.LOGSTORE_CLASS == "io.upsertsink.delta.S3ConditionalPutLogStore"


def test_paths_command_prints_local_paths(capsys):
    assert jars.main(["paths", "--s3a"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(p) for p in [*jars.delta_jars(), *jars.s3a_jars()]]
