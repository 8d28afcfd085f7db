"""Storage options for deltalake (delta-rs) calls: what the sink reads and writes outside Spark.

Both engines read markers and history, and keep helper tables, through deltalake. On the Spark engine those
calls must reach the same storage as the session does, with the same credentials; this module is the one
place that turns a sink's settings (and, on Spark, the session's configuration) into deltalake's
``storage_options``.

For S3 it also gives the settings for both engines from one description of the store
(:func:`s3a_spark_conf`, :func:`s3_deltalake_options`), including the multi-writer set-up: delta-spark
commits through upsertsink's ``S3ConditionalPutLogStore`` and deltalake through its own conditional PUT, so
every writer of a table, on either engine, coordinates through S3's ``If-None-Match`` (see
docs/deployment.md).
"""

from __future__ import annotations

import logging
import sys
from typing import Any
from urllib.parse import urlparse

from upsertsink.frames import is_connect

log = logging.getLogger(__name__)

S3_SCHEMES = ("s3a", "s3")
LOGSTORE_CLASS = "io.upsertsink.delta.S3ConditionalPutLogStore"

_ANONYMOUS = "AnonymousAWSCredentialsProvider"
_ASSUMED_ROLE = "AssumedRoleCredentialProvider"
_DYNAMODB_LOGSTORE = "S3DynamoDBLogStore"


def _scheme(path: str) -> str:
    return urlparse(path).scheme.lower() if "://" in path else ""


def deltalake_options(
    path: str, explicit: dict[str, str] | None = None, spark: Any = None
) -> dict[str, str] | None:
    """The ``storage_options`` for deltalake calls on ``path``.

    The sink's own (``explicit``) when given. Otherwise, for an ``s3a://`` or ``s3://`` path, the options
    derived from the Spark session's ``fs.s3a.*`` configuration (``spark``, or the active session when
    pyspark is in use), so that credentials are configured once, in Spark. Else None (deltalake then reads
    its usual environment variables).
    """
    if explicit:
        return dict(explicit)
    if _scheme(path) not in S3_SCHEMES:
        return None
    if spark is None:
        spark = _active_spark()
    if spark is None:
        return None
    return s3_options_from_spark(spark, path)


def _active_spark() -> Any:
    if "pyspark.sql" not in sys.modules:  # never import pyspark (and start nothing) for a pandas user
        return None
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None and "pyspark.sql.connect.session" in sys.modules:  # a Spark Connect client's session
        active = sys.modules["pyspark.sql.connect.session"].SparkSession.getActiveSession()
    return active


class _SessionHadoopConf:
    """Hadoop settings read as ``spark.hadoop.<key>`` from a session's settings (Spark Connect)."""

    def __init__(self, spark: Any):
        self.spark = spark

    def get(self, key: str) -> str | None:
        try:
            return self.spark.conf.get(f"spark.hadoop.{key}", None)
        except Exception:  # noqa: BLE001 - a setting the server does not show
            return None

    def getPassword(self, key: str) -> str | None:
        return self.get(key)


class _HadoopConf:
    """The session's Hadoop configuration as S3A sees it for one bucket (per-bucket keys win)."""

    def __init__(self, spark: Any, bucket: str):
        # Over Spark Connect there is no JVM here: the session's ``spark.hadoop.*`` settings stand in for it
        # (credential providers on the server are then not consulted; deltalake's default chain is).
        self.conf = _SessionHadoopConf(spark) if is_connect(spark) else spark._jsparkSession.sessionState().newHadoopConf()
        self.bucket = bucket

    def _keys(self, key: str) -> list[str]:
        suffix = key.removeprefix("fs.s3a.")
        return [f"fs.s3a.bucket.{self.bucket}.{suffix}", key] if self.bucket else [key]

    def get(self, key: str) -> str | None:
        for name in self._keys(key):
            value = self.conf.get(name)
            if value is not None and str(value).strip() != "":
                return str(value).strip()
        return None

    def secret(self, key: str) -> str | None:
        """A credential, looked up like S3A does: Hadoop credential providers first, then the conf."""
        for name in self._keys(key):
            chars = self.conf.getPassword(name)
            if chars is not None and len(chars):
                return "".join(str(c) for c in chars)
        return None

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key)
        return default if value is None else value.lower() == "true"


def s3_options_from_spark(spark: Any, path: str) -> dict[str, str]:
    """deltalake's S3 options equivalent to the session's S3A settings for the bucket of ``path``."""
    conf = _HadoopConf(spark, urlparse(path).netloc)
    options: dict[str, str] = {}
    endpoint = conf.get("fs.s3a.endpoint")
    path_style = conf.flag("fs.s3a.path.style.access", False)
    if endpoint:
        if "://" not in endpoint:
            secure = conf.flag("fs.s3a.connection.ssl.enabled", True)
            endpoint = f"{'https' if secure else 'http'}://{endpoint}"
        endpoint = endpoint.rstrip("/")
        if not path_style:
            # object_store takes a virtual-hosted endpoint as is: the bucket must be in it already.
            parts = urlparse(endpoint)
            endpoint = f"{parts.scheme}://{urlparse(path).netloc}.{parts.netloc}{parts.path}"
        options["AWS_ENDPOINT_URL"] = endpoint
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if path_style else "true"
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = conf.get("fs.s3a.endpoint.region") or conf.get("fs.s3a.region")
    if region:
        options["AWS_REGION"] = region

    providers = conf.get("fs.s3a.aws.credentials.provider") or ""
    access, secret = conf.secret("fs.s3a.access.key"), conf.secret("fs.s3a.secret.key")
    if _ANONYMOUS in providers:
        options["AWS_SKIP_SIGNATURE"] = "true"
    elif access and secret:
        options["AWS_ACCESS_KEY_ID"] = access
        options["AWS_SECRET_ACCESS_KEY"] = secret
        token = conf.secret("fs.s3a.session.token")
        if token:
            options["AWS_SESSION_TOKEN"] = token
    if _ASSUMED_ROLE in providers and conf.get("fs.s3a.assumed.role.arn"):
        options["AWS_IAM_ROLE_ARN"] = conf.get("fs.s3a.assumed.role.arn") or ""
        name = conf.get("fs.s3a.assumed.role.session.name")
        if name:
            options["AWS_IAM_ROLE_SESSION_NAME"] = name
    # Any other provider (environment, profile, instance role): deltalake's default chain finds the same.

    logstore = _spark_conf(spark, f"spark.delta.logStore.{_scheme(path)}.impl") or ""
    if _DYNAMODB_LOGSTORE in logstore:
        log.warning(
            "%s: delta-spark commits through %s, which deltalake 1.x does not speak (it commits with S3 "
            "conditional writes): do not let the embedded engine write this table at the same time; use %s "
            "on Spark instead (docs/deployment.md)", path, logstore, LOGSTORE_CLASS,
        )
    return options


def _spark_conf(spark: Any, key: str) -> str | None:
    value = spark.conf.get(key, None)  # the session's confs, which include the SparkConf it started with
    if value is not None or is_connect(spark):
        return value
    return spark.sparkContext.getConf().get(key, None)


# ---------------------------------------------------------------- one S3 store, both engines


def s3a_spark_conf(
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    region: str | None = None,
    path_style: bool = True,
) -> dict[str, str]:
    """Spark settings for Delta tables on S3 through ``s3a://`` (and ``s3://``), safe with other writers.

    ``endpoint`` is for S3-compatible stores (e.g. ``http://127.0.0.1:9000``); leave it None for AWS. With
    no keys, S3A's default credential chain is used. The JARs come from ``upsertsink.jars.ensure(s3a=True)``.
    """
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.path.style.access": "true" if path_style else "false",
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
        "spark.delta.logStore.s3a.impl": LOGSTORE_CLASS,
        "spark.delta.logStore.s3.impl": LOGSTORE_CLASS,
    }
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false" if endpoint.startswith("http://") else "true"
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    if access_key and secret_key:
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        conf["spark.hadoop.fs.s3a.access.key"] = access_key
        conf["spark.hadoop.fs.s3a.secret.key"] = secret_key
    return conf


def s3_deltalake_options(
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    region: str | None = None,
) -> dict[str, str]:
    """deltalake ``storage_options`` for the same store as :func:`s3a_spark_conf` (path-style requests).

    deltalake 1.x commits to S3 with conditional PUTs by default; nothing else is needed for several
    writers, and ``AWS_S3_ALLOW_UNSAFE_RENAME`` must stay unset.
    """
    options: dict[str, str] = {}
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if region:
        options["AWS_REGION"] = region
    if access_key and secret_key:
        options["AWS_ACCESS_KEY_ID"] = access_key
        options["AWS_SECRET_ACCESS_KEY"] = secret_key
    return options
