# bench.mk - `make bench`: times the shared networks (../shared) with `kinfer bench` next to
# ONNX Runtime and writes the table into docs/performance.md. Benchmarks are not tests: run
# them on a quiet machine. BENCH_THREADS (default 2), RUNS, WARMUP; ONNX Runtime is used when
# node finds onnxruntime-node (e.g. NODE_PATH=/tmp/ort/node_modules).
SHARED        ?= ../shared
BENCH_THREADS ?= 2

.PHONY: bench
bench: $(BUILD)/kinfer
	@if [ -d "$(SHARED)/models" ]; then \
	  sh tests/bench/run_bench.sh $(BUILD)/kinfer $(SHARED) $(BENCH_THREADS) docs/performance.md; \
	else echo "bench: $(SHARED)/models not found (set SHARED=...)"; fi
