"""storage.deltalake_options(): deltalake's options come from the sink, or from the Spark session's S3A conf."""

from __future__ import annotations

import pytest

from upsertsink import storage


def s3a_session(spark, **conf: str):
    """A child session (own SQL conf, shared JVM) whose Hadoop conf carries ``conf``."""
    session = spark.newSession()
    for key, value in conf.items():
        session.conf.set(key, value)
    return session


def test_explicit_options_win_and_are_copied():
    mine = {"AWS_REGION": "eu-west-1"}
    got = storage.deltalake_options("s3a://b/t", mine)
    assert got == mine and got is not mine


@pytest.mark.spark
def test_local_paths_and_no_session_give_none(spark):
    assert storage.deltalake_options("/tmp/t") is None
    assert storage.deltalake_options("/tmp/t", spark=spark) is None
    assert storage.deltalake_options("file:///tmp/t", spark=spark) is None
    assert storage.deltalake_options("s3a://b/t", spark=None) is not None  # the active session is used
    assert storage.deltalake_options("gs://b/t", spark=spark) is None


@pytest.mark.spark
def test_s3a_settings_of_the_session_become_deltalake_options(spark):
    session = s3a_session(
        spark,
        **{
            "fs.s3a.endpoint": "127.0.0.1:9000",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.path.style.access": "true",
            "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.access.key": "AKIA-test",
            "fs.s3a.secret.key": "s3cret",
            "fs.s3a.session.token": "tok",
        },
    )
    for path in ("s3a://lake/orders", "s3://lake/orders"):
        assert storage.deltalake_options(path, spark=session) == {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "AKIA-test",
            "AWS_SECRET_ACCESS_KEY": "s3cret",
            "AWS_SESSION_TOKEN": "tok",
        }


@pytest.mark.spark
def test_per_bucket_settings_override_the_global_ones(spark):
    session = s3a_session(
        spark,
        **{
            "fs.s3a.endpoint": "https://s3.example.com",
            "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "global",
            "fs.s3a.secret.key": "global-secret",
            "fs.s3a.bucket.special.endpoint": "http://10.0.0.5:9000/",
            "fs.s3a.bucket.special.access.key": "special",
            "fs.s3a.bucket.special.secret.key": "special-secret",
        },
    )
    special = storage.deltalake_options("s3a://special/t", spark=session)
    assert special["AWS_ENDPOINT_URL"] == "http://10.0.0.5:9000"
    assert special["AWS_ALLOW_HTTP"] == "true"
    assert (special["AWS_ACCESS_KEY_ID"], special["AWS_SECRET_ACCESS_KEY"]) == ("special", "special-secret")
    other = storage.deltalake_options("s3a://other/t", spark=session)
    assert other["AWS_ENDPOINT_URL"] == "https://s3.example.com" and "AWS_ALLOW_HTTP" not in other
    assert other["AWS_ACCESS_KEY_ID"] == "global"


@pytest.mark.spark
def test_virtual_hosted_endpoint_gets_the_bucket_and_providers_map(spark):
    session = s3a_session(
        spark,
        **{
            "fs.s3a.endpoint": "storage.example.com",
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",
        },
    )
    got = storage.deltalake_options("s3a://public-data/t", spark=session)
    assert got["AWS_ENDPOINT_URL"] == "https://public-data.storage.example.com"
    assert got["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"
    assert got["AWS_SKIP_SIGNATURE"] == "true" and "AWS_ACCESS_KEY_ID" not in got

    role = s3a_session(
        spark,
        **{
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider",
            "fs.s3a.assumed.role.arn": "arn:aws:iam::123456789012:role/writer",
            "fs.s3a.assumed.role.session.name": "etl",
        },
    )
    got = storage.deltalake_options("s3a://lake/t", spark=role)
    assert got == {"AWS_IAM_ROLE_ARN": "arn:aws:iam::123456789012:role/writer", "AWS_IAM_ROLE_SESSION_NAME": "etl"}


@pytest.mark.spark
def test_default_credential_chain_passes_no_keys(spark):
    session = s3a_session(spark, **{"fs.s3a.endpoint.region": "eu-central-1"})
    assert storage.deltalake_options("s3a://lake/t", spark=session) == {"AWS_REGION": "eu-central-1"}


@pytest.mark.spark
def test_dynamodb_logstore_on_spark_is_warned_about(spark, caplog):
    session = s3a_session(spark, **{"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"})
    with caplog.at_level("WARNING", logger="upsertsink.storage"):
        storage.deltalake_options("s3a://lake/t", spark=session)
    assert "S3DynamoDBLogStore" in caplog.text and storage.LOGSTORE_CLASS in caplog.text


def test_spark_conf_and_deltalake_options_describe_one_store():
    conf = storage.s3a_spark_conf("http://127.0.0.1:9000", "k", "s", "us-east-1")
    assert conf["spark.delta.logStore.s3a.impl"] == storage.LOGSTORE_CLASS
    assert conf["spark.delta.logStore.s3.impl"] == storage.LOGSTORE_CLASS
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    options = storage.s3_deltalake_options("http://127.0.0.1:9000", "k", "s", "us-east-1")
    assert options == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in options
