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

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The unit, lit, e2e and conformance suites under ASan + UBSan (build-asan/).
test-asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPC_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS)

demo: build
	@tools/demo.sh $(BUILD)

format:
	find passes runtime kernels tools tests \( -name '*.h' -o -name '*.cpp' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) | xargs clang-format -i

clean:
	rm -rf $(BUILD)
