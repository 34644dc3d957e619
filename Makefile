# Convenience wrapper around CMake.  The real build lives in CMakeLists.txt.
#
#   make build      configure + build build/ (Debug)
#   make demo       install deps, build, run tools/demo.sh
#   make test       install deps; build/ (Debug, -Werror) + ctest;
#                   build-asan/ (ASan+UBSan, -Werror, no bench) + ctest, then
#                   build-tsan/ (ThreadSanitizer: only the tests labelled
#                   "threads" and the plugins they load; make test-tsan), then
#                   build-release-test/ (Release, -Werror) + ctest, which also
#                   runs the model tests on references generated afresh
#                   (models_fresh_refs, docs/testing_models.md)
#   make bench      Release build in build-release/, run every bench binary and
#                   bench/models.sh (real models beside ONNX Runtime's figures)
#   make install    PREFIX=/some/prefix (default /usr/local)
#   make format     clang-format -i on all project C files
#   make fuzz       libFuzzer run in build-fuzz/ (clang; FUZZ_TARGET=onnx_run_fuzz
#                   (default: import, InferShapes, run) or onnx_import_fuzz;
#                   FUZZ_SECONDS, default 600; not part of make test)
#   make clean      remove all build directories

SHELL      := /bin/bash
CMAKE      ?= cmake
CTEST      ?= ctest
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX     ?= /usr/local
BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
TSAN_DIR   ?= build-tsan
REL_DIR    ?= build-release
RELTEST_DIR ?= build-release-test
CTEST_JOBS ?= 2
FUZZ_DIR   ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_FLAGS ?=
FUZZ_TARGET ?= onnx_run_fuzz

FORMAT_DIRS := core cli plugin-api plugins tests bench sdk

.PHONY: all deps configure build demo test test-debug test-asan test-tsan test-release bench fuzz install clean format help

all: build

help:
	@sed -n '2,/^$$/p' Makefile

deps:
	@bash tools/install-deps.sh

configure:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Debug

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)

demo: deps build
	@bash tools/demo.sh

# Both configurations are always run; the target fails if either fails.
# The ASan+UBSan build is the Debug build plus the sanitizers, so a plain Debug
# run would repeat it: make test runs the sanitizer, ThreadSanitizer and Release
# builds (test-debug stays for a quick run without the sanitizers).
test: deps
	@rc=0; \
	$(MAKE) --no-print-directory test-asan || rc=1; \
	$(MAKE) --no-print-directory test-tsan || rc=1; \
	$(MAKE) --no-print-directory test-release || rc=1; \
	if [ $$rc -eq 0 ]; then echo "make test: sanitizer, thread-sanitizer and release runs passed"; \
	else echo "make test: FAILED (see above)"; fi; \
	exit $$rc

test-debug:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Debug -DKILN_WERROR=ON -DKILN_BUILD_TESTS=ON
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)
	cd $(BUILD_DIR) && $(CTEST) --output-on-failure -j$(CTEST_JOBS)

# Release (-O2) with -Werror: catches warnings and behaviour that only appear optimised.
# It also checks, once, the path a new user takes: the model tests on ONNX
# Runtime references generated into an empty cache (KILN_TEST_FRESH_REFS).
test-release:
	$(CMAKE) -S . -B $(RELTEST_DIR) -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON \
	    -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCH=ON -DKILN_TEST_FRESH_REFS=ON
	$(CMAKE) --build $(RELTEST_DIR) -j$(JOBS)
	cd $(RELTEST_DIR) && $(CTEST) --output-on-failure -j$(CTEST_JOBS)

test-asan:
	$(CMAKE) -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_WERROR=ON \
	    -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_TESTS=ON
	$(CMAKE) --build $(ASAN_DIR) -j$(JOBS)
	cd $(ASAN_DIR) && $(CTEST) --output-on-failure -j$(CTEST_JOBS)

# ThreadSanitizer over the tests labelled "threads" (tests/core/test_parallel.c:
# the kernel used from parallel tasks; tests/core/test_ms_differential.c: the
# multistream runtime's worker threads; and the plugins of the default manifest
# they run).  Only those targets are built, to keep CI short.  The kernels are
# built without OpenMP there (KILN_OPENMP=OFF: libgomp is not instrumented, so
# TSan cannot see its barriers and would report every parallel kernel; the
# loops run serially, docs/testing.md).  TSan reports
# are fatal; tools/tsan.supp lists the suppressed ones, each with the reason it
# is benign.
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
# the plugins: every libkiln_*.so the default manifest lists (read from it, so
# the list follows the manifest)
TSAN_TARGETS := test_parallel test_ms_differential test_ms_soak test_alloc_api tp_good \
    $(shell sed -n 's/.*"path": *"lib\(kiln_[A-Za-z0-9_]*\)\.so".*/\1/p' manifests/default.json)
test-tsan:
	$(CMAKE) -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DKILN_WERROR=ON \
	    -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_TESTS=ON -DKILN_OPENMP=OFF \
	    -DCMAKE_C_FLAGS="$(TSAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
	    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=thread"
	$(CMAKE) --build $(TSAN_DIR) -j$(JOBS) --target $(TSAN_TARGETS)
	cd $(TSAN_DIR) && TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$(CURDIR)/tools/tsan.supp" \
	    $(CTEST) --output-on-failure -j$(CTEST_JOBS) -L threads

bench: deps
	$(CMAKE) -S . -B $(REL_DIR) -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=ON
	$(CMAKE) --build $(REL_DIR) -j$(JOBS)
	@rc=0; found=0; \
	for b in $(REL_DIR)/bin/bench_*; do \
	    [ -x "$$b" ] || continue; found=1; \
	    echo "== $$b"; "$$b" || rc=1; \
	done; \
	[ $$found -eq 1 ] || echo "no benchmarks (bench/*.c) found"; \
	echo "== bench/models.sh"; KILN_BIN=$(REL_DIR)/bin/kiln bash bench/models.sh || rc=1; \
	exit $$rc

# libFuzzer on the ONNX importer, InferShapes and the runtime (fuzz/, docs/onnx.md).  Seeds: the twelve real
# models (tools/fetch-models.sh; skipped when unavailable), the hand-made models
# of tests/data/onnx/gen_models.py and the saved regression inputs
# tests/data/onnx/fuzz/.  New corpus -> $(FUZZ_DIR)/corpus/, crashes ->
# $(FUZZ_DIR)/crashes/.  Exit status non-zero when the fuzzer found something.
fuzz:
	CC=clang $(CMAKE) -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=Debug -DKILN_FUZZ=ON \
	    -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF
	$(CMAKE) --build $(FUZZ_DIR) -j$(JOBS) --target $(FUZZ_TARGET)
	@set -e; seeds=$(FUZZ_DIR)/seeds; rm -rf $$seeds; mkdir -p $$seeds \
	    $(FUZZ_DIR)/corpus $(FUZZ_DIR)/crashes; \
	python3 tests/data/onnx/gen_models.py $$seeds/gen >/dev/null; \
	cp $$seeds/gen/*.onnx $$seeds/; rm -rf $$seeds/gen; \
	cp tests/data/onnx/fuzz/*.onnx tests/data/onnx/fuzz_run/* $$seeds/ 2>/dev/null || true; \
	if models=$$(bash tools/fetch-models.sh 2>/dev/null); then cp "$$models"/*.onnx $$seeds/; \
	else echo "make fuzz: real models unavailable, seeding with the hand-made ones only"; fi; \
	echo "make fuzz: $$(ls $$seeds | wc -l) seeds, $(FUZZ_SECONDS) s"
	$(FUZZ_DIR)/bin/$(FUZZ_TARGET) $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds \
	    -dict=fuzz/onnx.dict -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=2500000 -timeout=10 -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_DIR)/crashes/ \
	    -print_final_stats=1 $(FUZZ_FLAGS)

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix "$(PREFIX)"

format:
	@files=$$(find $(FORMAT_DIRS) -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null); \
	if [ -n "$$files" ]; then clang-format -i $$files; echo "formatted $$(echo $$files | wc -w) files"; fi

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(REL_DIR) $(RELTEST_DIR) $(FUZZ_DIR)
