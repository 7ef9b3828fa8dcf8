# Entry points: `make demo` and `make test` do all set-up on a fresh machine.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo clean format bench

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

demo: build
	@tools/demo.sh $(BUILD)

format:
	find passes runtime kernels tools tests \( -name '*.h' -o -name '*.cpp' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) | xargs clang-format -i

clean:
	rm -rf $(BUILD)
