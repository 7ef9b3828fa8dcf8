# Entry points: `make demo` and `make test` do all set-up on a fresh machine.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all setup configure build test test-asan demo clean format bench

all: build

setup:
	@tools/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: setup $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# A red run ends by printing the failed tests' own output again
# (tools/ctest-failures.sh), where a log's tail is all that is kept.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) || { tools/ctest-failures.sh $(BUILD); exit 1; }

# The unit, lit, e2e and conformance suites under ASan + UBSan (build-asan/).
test-asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPC_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS) || { tools/ctest-failures.sh build-asan; exit 1; }

# libFuzzer targets (tests/fuzz) under ASan + UBSan, built with clang into
# build-fuzz/ with assertions on; FUZZ_SECONDS per target, findings in
# build-fuzz/findings/. Not part of make test (which replays the corpus).
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: setup
	@tools/setup-fuzz.sh
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DMPC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" $(CMAKE_FLAGS)
	cmake --build build-fuzz -j$(JOBS) --target mpc-fuzzers
	tests/fuzz/run_fuzz.sh build-fuzz $(FUZZ_SECONDS)

# On a machine with an NVIDIA GPU: build for sm_90 into build-gpu/, run
# backend-ops, train the seed MLP on CUDA against the CPU, time cuBLAS GEMM
# (tools/gpu-check.sh; logs under build-gpu/results/). Not part of make test.
.PHONY: gpu-check
gpu-check:
	@tools/gpu-check.sh

# For a GPU machine without the host packages (the device tool's): the
# sm_90 bundle and ONNX's node test data in .gpu/ (git-ignored), to carry
# there and run with tools/gpu-check.sh --prebuilt .gpu/gpu-bundle.tar.xz
# (the procedure is in tools/gpu-check.sh's header).
.PHONY: gpu-bundle
gpu-bundle: setup
	@mkdir -p .gpu
	@x=$$(git rev-parse --git-path info/exclude) && mkdir -p "$$(dirname "$$x")" && \
	  { grep -qx '/.gpu/' "$$x" 2>/dev/null || echo /.gpu/ >>"$$x"; }
	@tools/gpu-check.sh --bundle .gpu/gpu-bundle.tar.xz
	@tar -C /usr/share/libonnx-testdata/data -cJf .gpu/node.tar.xz node
	@ls -l .gpu

demo: build
	@tools/demo.sh $(BUILD)

# Benchmarks (bench/run_all.sh): compile time, memory plan, CPU step against PyTorch,
# parity; tables on stdout, JSON in bench/results/. Not part of make test. PyTorch and
# onnxconverter-common columns need `pip install torch onnxconverter-common`.
bench: build
	@bench/run_all.sh $(BUILD)

format:
	find ir support passes runtime kernels tools tests \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | xargs clang-format -i

clean:
	rm -rf $(BUILD)
