"""What the linter knows about the Spark, Delta, pandas and pipeline APIs: one table, read by every stage.

Each method name maps to its roles, words separated by spaces:

- ``frame``: returns a DataFrame (or a reader, writer, builder); the result carries no value of its own,
  what the call writes is a fact of its own (column writes, row choices);
- ``pass``: between a row choice and a look-only action it writes nothing itself (``limit().select().show()``);
- ``keep``: keeps the columns of the DataFrame it is called on;
- ``rows``: decides which rows are written when called on a DataFrame;
- ``store``: stores data wherever it is called (others, such as ``parquet``, only after ``.write``);
- ``transform``: a transformation whose result, thrown away as a statement of its own, writes nothing;
- ``order``: orders the rows (a ``limit`` after it is exact);
- ``look``: an action that only looks at the data (a row choice feeding it never reaches a table);
- ``alias``: names the column expression it is called on;
- ``map=KW/POS``: takes a merge map (column -> value) as keyword ``KW`` or positional argument ``POS``;
- ``matched-update``: a matched-row update clause, whose condition says which version wins;
- ``pandas``: returns a pandas DataFrame (a module function only when called on ``pandas``), whose
  ``head(n)`` / ``iloc[:n]`` choose rows;
- ``widget-read``: reads a notebook widget's value (``dbutils.widgets.get(name)``);
- ``fact=NAME``: the fact extractor of :mod:`upsertsink.lint.flow.collect` that reads the call (``_on_NAME``).

The sets the stages use (``FRAME_METHODS``, ``PASS_THROUGH``...) are derived from the table; nothing else in
the linter lists method names of these APIs. Rules declare their own sources in their catalogues.
"""

from __future__ import annotations

import sys

METHODS: dict[str, str] = {
    "addColumn": "fact=add_column",
    "agg": "frame transform fact=select",
    "alias": "pass transform alias",
    "applyInPandas": "frame",
    "as_": "alias",
    "assign": "frame fact=assign",
    "cache": "frame pass keep",
    "checkpoint": "frame pass keep",
    "coalesce": "frame pass keep",
    "collect": "frame look",
    "config": "fact=dbt_config",
    "combobox": "fact=widget",
    "count": "frame look",
    "createDataFrame": "frame fact=to_df",
    "createOrReplaceTempView": "frame",
    "crossJoin": "frame",
    "DataFrame": "fact=records pandas",
    "csv": "frame",
    "describe": "look",
    "display": "look",
    "distinct": "frame pass transform",
    "drop": "frame pass",
    "dropdown": "fact=widget",
    "drop_duplicates": "frame pass rows transform",
    "dropDuplicates": "frame pass rows transform",
    "dropDuplicatesWithinWatermark": "frame rows",
    "dropna": "frame",
    "execute": "frame store",
    "getOrCreate": "frame",  # a SparkSession: what it was built with (an app name) is no value of its data
    "explain": "look",
    "fillna": "frame",
    "filter": "frame pass rows transform fact=filter",
    "first": "look",
    "for_table": "fact=sink_for_table",
    "foreachBatch": "frame store",
    "forName": "frame fact=delta_table",
    "forPath": "frame fact=delta_table",
    "from_pylist": "fact=records",
    "from_records": "fact=records pandas",
    "get": "widget-read",
    "getArgument": "widget-read",
    "groupby": "frame",
    "groupBy": "frame",
    "head": "look transform",
    "hint": "frame pass keep",
    "insertInto": "frame store fact=table_write",
    "isEmpty": "look",
    "join": "transform fact=join",
    "json": "frame",
    "limit": "frame pass rows transform",
    "load": "frame",
    "localCheckpoint": "frame pass keep",
    "mapInArrow": "frame",
    "mapInPandas": "frame",
    "multiselect": "fact=widget",
    "merge": "frame fact=merge",
    "name": "alias",
    "nlargest": "order",
    "nsmallest": "order",
    "observe": "frame",
    "option": "frame fact=option",
    "options": "frame",
    "orc": "frame",
    "orderBy": "frame pass transform order",
    "outputMode": "frame",
    "pandas_api": "pandas",
    "parquet": "frame",
    "persist": "frame pass keep",
    "pivot": "frame",
    "printSchema": "look",
    "randomSplit": "frame rows",
    "read": "frame",
    "read_csv": "pandas",
    "read_excel": "pandas",
    "read_json": "pandas",
    "read_parquet": "pandas",
    "read_sql": "pandas",
    "read_sql_query": "pandas",
    "read_sql_table": "pandas",
    "read_table": "pandas",
    "readStream": "frame",
    "register": "fact=register",
    "registerTempTable": "frame",
    "rename": "frame pass transform fact=renames",
    "repartition": "frame pass keep",
    "repartitionByRange": "frame pass keep",
    "sample": "frame pass rows transform",
    "sampleBy": "frame rows",
    "save": "frame fact=table_write",
    "saveAsTable": "frame store fact=table_write",
    "schema": "frame",
    "seed": "fact=seed",
    "select": "frame pass transform fact=select",
    "selectExpr": "frame pass transform fact=select_expr",
    "show": "frame look",
    "sort": "frame pass transform order",
    "sort_index": "order",
    "sort_values": "order",
    "sortWithinPartitions": "frame pass keep",  # orders each partition only: a limit after it is not exact
    "sql": "frame fact=sql",
    "start": "frame",
    "summary": "look",
    "table": "frame",
    "tail": "look transform",
    "take": "look",
    "text": "frame fact=widget",
    "to_delta": "store",
    "to_pandas": "pandas",
    "to_pandas_on_spark": "pandas",
    "to_sql": "store",
    "to_table": "store",
    "toDF": "frame pass fact=to_df",
    "toJSON": "look",
    "toLocalIterator": "look",
    "toPandas": "frame look pandas",
    "toTable": "store fact=table_write",
    "transform": "frame pass",
    "trigger": "frame",
    "union": "frame pass keep transform",
    "unionAll": "frame pass keep",
    "unionByName": "frame pass keep transform",
    "unpersist": "frame",
    "UpsertSink": "fact=sink",
    "when_matched_delete": "frame fact=key_condition",
    "when_matched_update": "frame map=updates/0 matched-update fact=merge_map",
    "when_matched_update_all": "frame fact=update_all",
    "when_not_matched_by_source_delete": "frame fact=key_condition",
    "when_not_matched_by_source_update": "frame map=updates/0 fact=merge_map",
    "when_not_matched_insert": "frame map=updates/0 fact=merge_map",
    "when_not_matched_insert_all": "frame fact=key_condition",
    "whenMatchedDelete": "frame fact=key_condition",
    "whenMatchedUpdate": "frame map=set/1 matched-update fact=merge_map",
    "whenMatchedUpdateAll": "frame fact=update_all",
    "whenNotMatchedBySourceDelete": "frame fact=key_condition",
    "whenNotMatchedBySourceUpdate": "frame map=set/1 fact=merge_map",
    "whenNotMatchedInsert": "frame map=values/1 fact=merge_map",
    "whenNotMatchedInsertAll": "frame fact=key_condition",
    "where": "frame pass rows transform fact=filter",
    "withColumn": "frame pass transform fact=with_column",
    "withColumnRenamed": "frame pass transform fact=rename",
    "withColumns": "frame pass transform fact=with_columns",
    "withColumnsRenamed": "frame pass transform fact=renames",
    "withWatermark": "frame keep",
    "write": "frame",
    "write_deltalake": "store",
    "writeStream": "frame",
}


def _with(role: str) -> frozenset[str]:
    return frozenset(m for m, roles in METHODS.items() if role in roles.split())


def _param(prefix: str) -> dict[str, str]:
    return {
        m: word[len(prefix) :]
        for m, roles in METHODS.items()
        for word in roles.split()
        if word.startswith(prefix)
    }


FRAME_METHODS = _with("frame")
PASS_THROUGH = _with("pass")
COLUMN_KEEPING = _with("keep")
ROW_METHODS = _with("rows")
STORE_METHODS = _with("store")
TRANSFORMS = _with("transform")
ORDER_METHODS = _with("order")
LOOK_ONLY_ACTIONS = _with("look")
ALIAS_METHODS = _with("alias")
MATCHED_UPDATES = _with("matched-update")
PANDAS_FRAMES = _with("pandas")
# A DataFrame's attributes that are not one of its columns (``df.columns`` is the list of all of them: a
# ``select(staging.columns)`` keeps columns not known here, never one named "columns")
FRAME_PROPERTIES = frozenset(
    {"columns", "dtypes", "schema", "names", "index", "values", "shape", "rdd", "na", "stat", "write",
     "writeStream", "isStreaming", "sparkSession", "T", "loc", "iloc", "at", "iat"}
)
RECORD_TABLES = _with("fact=records")  # turn a list of dict records into a table
WIDGET_READS = _with("widget-read")
MERGE_MAPS: dict[str, tuple[str, int]] = {
    m: (spec.split("/")[0], int(spec.split("/")[1])) for m, spec in _param("map=").items()
}
FACTS: dict[str, str] = _param("fact=")

# Attributes that start a writer chain: ``df.write...``, ``df.writeStream...``, ``df.writeTo(...)``.
WRITE_ATTRS = frozenset({"write", "writeStream", "writeTo"})
# Keywords that name a MERGE's condition (delta-spark, delta-rs).
MERGE_CONDITION_KEYWORDS = ("condition", "predicate", "merge_condition")
# Spark functions that take a column name as their first argument, and the ordering wrappers.
NAME_ARG_FUNCTIONS = frozenset({"col", "column"})
ORDER_WRAPPERS = frozenset(
    {"desc", "asc", "desc_nulls_first", "desc_nulls_last", "asc_nulls_first", "asc_nulls_last"}
)
# Functions that only show what they are given: ``display(df.limit(10))`` writes nothing.
LOOK_ONLY_FUNCTIONS = frozenset({"print", "display", "len", "repr", "pprint"})
# Methods of other objects that only read a DataFrame they are given (an evaluator scoring predictions).
LOOK_ONLY_CONSUMERS = frozenset({"evaluate", "assertDataFrameEqual", "assert_frame_equal"})
# The object of a Databricks notebook's widgets (``dbutils.widgets.text(name, default)``, ``.get(name)``).
WIDGETS_OBJECT = "dbutils.widgets"
# Names a notebook (or a module that %runs another) uses without importing them: pyspark's conventions.
CONVENTIONAL = {
    "F": "pyspark.sql.functions",
    "T": "pyspark.sql.types",
    "W": "pyspark.sql.window.Window",
    "Window": "pyspark.sql.window.Window",
}
# Module prefixes that are never other files of the linted tree (and the standard library).
LIBRARY_PREFIXES = ("pyspark", "delta", "deltalake", "upsertsink", "datetime", "time", "uuid", "random", "os")
STDLIB = frozenset(sys.stdlib_module_names) - {"", "__future__"}
# The module prefixes under which pyspark exposes its column functions.
SPARK_FUNCTION_MODULES = (
    "pyspark.sql.functions",
    "pyspark.sql.functions.builtin",
    "pyspark.sql.connect.functions",
    "pyspark.sql.connect.functions.builtin",
)


# Declarative pipelines: Databricks' ``dlt`` (Delta Live Tables) and Spark's ``pyspark.pipelines`` (Lakeflow's
# ``from pyspark import pipelines as dp``). Their names are recognized by import-qualified name only.
PIPELINE_MODULES = frozenset({"dlt", "pyspark.pipelines"})
# CDC flows, which upsert a source's rows into a streaming table by key, the newest by sequence winning:
# function -> its parameters in positional order (the snapshot flows take no ``sequence_by``).
PIPELINE_CDC_FLOWS: dict[str, tuple[str, ...]] = {
    "apply_changes": ("target", "source", "keys", "sequence_by"),
    "create_auto_cdc_flow": ("target", "source", "keys", "sequence_by"),
    "apply_changes_from_snapshot": ("target", "source", "keys"),
    "create_auto_cdc_from_snapshot_flow": ("target", "source", "keys"),
}
# Keywords of a CDC flow whose condition decides which rows are deleted (or the table truncated).
PIPELINE_CDC_CONDITIONS = ("apply_as_deletes", "apply_as_truncates")
# Decorators that make a function a query function of the pipeline: the pipeline calls it again on every
# update. Those that define a stored dataset (its returned DataFrame is written to a table) are ``STORED``.
PIPELINE_QUERY_DECORATORS = frozenset({"table", "materialized_view", "append_flow", "view", "temporary_view"})
PIPELINE_STORED = frozenset({"table", "materialized_view", "append_flow"})
# Words that make the pre-filter analyze a file declaring a CDC flow's keys and sequence.
PIPELINE_TRIGGER_WORDS = frozenset({"apply_changes", "auto_cdc", "sequence_by"})


def pipeline_name(q: str | None) -> str | None:
    """The function name of an import-qualified name of a pipeline module (``dlt.apply_changes`` ->
    ``apply_changes``), else None."""
    if q is None or "." not in q:
        return None
    mod, name = q.rsplit(".", 1)
    return name if mod in PIPELINE_MODULES else None


def is_library(module: str) -> bool:
    """Is ``module`` a library (never a file of the linted tree whose summary could be read)?"""
    return module.startswith(LIBRARY_PREFIXES) or module.split(".", 1)[0] in STDLIB
