# Convenience wrappers around dev.py (which needs only Python >= 3.12 and the package registries).
.PHONY: run test check setup bench
run:
	python3 dev.py run
test:
	python3 dev.py test
check:
	python3 dev.py check
setup:
	python3 dev.py setup
bench:
	.venv/bin/python benchmarks/engine_bench.py
