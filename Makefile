# The README's two commands: `make demo` and `make test`. Each one installs what it needs first.
.PHONY: demo test setup lint-examples bench stress cluster cluster-stop cluster-test test-long

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@.venv/bin/python examples/orders_change_feed.py

test: setup
	@bash scripts/test.sh

lint-examples: setup
	@.venv/bin/upsertsink lint examples

# A short version of the benchmarks (about 17 minutes): the sink against the raw MERGE, micro-batches on both
# engines, the long stream (600 batches; the full run is `bench/bench_long_stream.py --batches 10000`) and the
# sink over Spark Connect against a raw SQL MERGE, and history tables (SCD2) against the hand-written SCD2 MERGE.
bench: setup
	@.venv/bin/python bench/bench_sink.py --repeat 2
	@.venv/bin/python bench/bench_microbatch.py --batches 15 --warmup 3 --tables 5000
	@.venv/bin/python bench/bench_long_stream.py --engines embedded,spark --batches 600 --sample-every 100 \
		--log-retention "interval 1 minute" --output bench/results/long_stream_short.json
	@.venv/bin/python bench/bench_connect.py --micro-batches 10 --large-batches 2 --profile 0 --output bench/results/connect_short.json
	@.venv/bin/python bench/bench_history.py --keys 300000 --repeat 2 --output bench/results/history_short.json

# A Spark standalone cluster (master + 2 workers), a Spark Connect server in front of it and an S3 server (moto)
# on 127.0.0.1, left running for you to try; it prints where everything is and how to stop it (`make cluster-stop`). See docs/deployment.md.
cluster: setup
	@.venv/bin/python -m upsertsink.jars ensure --s3a
	@.venv/bin/python scripts/localcluster.py start --connect

cluster-stop:
	@.venv/bin/python scripts/localcluster.py stop

# The whole cluster / object-store suite: starts its own cluster and S3 server, runs, stops them.
cluster-test: setup
	@bash scripts/cluster_test.sh

# The tests marked `long` (short Spark stress runs) that `make test` leaves out.
test-long: setup
	@.venv/bin/python -m pytest -q -p no:cacheprovider -m long tests/reliability

# Random kills and concurrent writers compared with the model (docs/reliability.md); writes bench/results/stress.json.
stress: setup
	@.venv/bin/python tests/reliability/stress.py
