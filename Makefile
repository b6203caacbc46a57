# Thin wrapper over CMake. `make` installs missing Debian packages (as root),
# configures and builds; `make test` runs the suite; `make demo` shows dcc at
# work on an example; `make install PREFIX=DIR` installs dcc, the libraries,
# headers, pkg-config files and CMake package (default /usr/local).
# Everything real lives in CMakeLists.txt.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build test install demo bench bench-tuning bench-static bench-model bench-onnx clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --no-tests=error --output-on-failure -j$(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

demo: build
	@scripts/demo.sh $(BUILD)/dcc

# The four BERT-base dense layers, defaults and then tuned (JIT and object,
# against oneDNN and OpenBLAS); about 2 minutes on 2 cores after the build.
BENCH_LAYERS = examples/bert_qkv.tex bench/layers/bert_attn_out.tex \
               bench/layers/bert_ffn1.tex bench/layers/bert_ffn2.tex
bench: deps
	@scripts/install-deps.sh --bench
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target dcc bench_dense bench_tuning bench_aot
	$(BUILD)/bench/bench_aot $(CURDIR)
	$(BUILD)/bench/bench_dense --step 8 --reps 15 $(CURDIR)
	@rm -f $(BUILD)/bench/tuned.jsonl
	@for f in $(BENCH_LAYERS); do \
	  $(BUILD)/dcc tune $$f --trials 32 --records $(BUILD)/bench/tuned.jsonl || exit 1; done
	$(BUILD)/bench/bench_dense --records $(BUILD)/bench/tuned.jsonl --step 8 --reps 15 $(CURDIR)

# DietCode's claim: joint tuning against per-shape tuning and OpenBLAS (BERT
# QKV, T = 1..128, CPU); about 10 minutes on 2 cores.
bench-tuning: deps
	@scripts/install-deps.sh --bench
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target bench_tuning
	$(BUILD)/bench/bench_tuning $(CURDIR)

# A static model's shape instances tuned once into a few kernels: ResNet-50's
# 1x1 convolutions (15 points) against per-shape tuning, oneDNN, OpenBLAS.
bench-static: deps
	@scripts/install-deps.sh --bench
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target bench_static
	$(BUILD)/bench/bench_static $(CURDIR)

# A whole BERT-base encoder layer against PyTorch (eager, torch.compile) and
# numpy, T = 1..128, CPU; PyTorch from PyPI in .venv-model (about 5 GB).
bench-model: deps
	@scripts/install-deps.sh --bench-model
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target bench_model
	.venv-model/bin/python bench/model.py --build $(BUILD)

# BERT-base and GPT-2 small from their ONNX files against ONNX Runtime and
# PyTorch eager, batch 1..4 and sequence 1..512, CPU (bench/onnx_models.py).
bench-onnx: deps
	@scripts/install-deps.sh --bench-model
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target bench_model
	.venv-model/bin/python bench/onnx_models.py --build $(BUILD)

clean:
	rm -rf $(BUILD)
