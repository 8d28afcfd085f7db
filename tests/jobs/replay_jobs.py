"""Small jobs for the replay-check tests: one deterministic, two that depend on what must not matter."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F


def totals(spark: SparkSession, orders: DataFrame, customers: DataFrame) -> DataFrame:
    """Deterministic: revenue per customer, joined with the customer's name."""
    revenue = orders.groupBy("customer").agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
    return revenue.join(customers, "customer", "left")


def numbered(spark: SparkSession, orders: DataFrame) -> DataFrame:
    """Broken: the key is a row id that depends on partitioning."""
    return orders.withColumn("row_id", F.monotonically_increasing_id())


def first_order(spark: SparkSession, orders: DataFrame) -> DataFrame:
    """Broken: "the first order" of an unordered group depends on the row order."""
    w = Window.partitionBy("customer").orderBy(F.lit(1))
    return orders.withColumn("n", F.row_number().over(w)).filter("n = 1").select("customer", "order_id")


def not_a_frame(spark: SparkSession, orders: DataFrame) -> int:
    """Broken differently: returns no DataFrame."""
    return 42
