"""How the sink reaches a table: through its files (deltalake) or by its name in Spark's catalog (Spark SQL)."""
