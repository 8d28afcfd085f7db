# The README's two commands: `make demo` and `make test`. Each one installs what it needs first.
.PHONY: demo test setup lint-examples bench stress

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@.venv/bin/python examples/orders_change_feed.py

test: setup
	@bash scripts/test.sh

lint-examples: setup
	@.venv/bin/upsertsink lint examples

bench: setup
	@.venv/bin/python bench/bench_sink.py

# Random kills and concurrent writers compared with the model (docs/reliability.md); writes bench/results/stress.json.
stress: setup
	@.venv/bin/python tests/reliability/stress.py
