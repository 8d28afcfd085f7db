"""What the sink keeps beside a table: the folder store, tombstones, history events, the list of apps."""
