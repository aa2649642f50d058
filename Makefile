# Newcomers: `make demo` runs the H100 MIG walkthrough, `make test` runs every test suite.
# Both install the Debian packages they need (tools/setup.sh), configure build/ once and compile.

BUILD_DIR := build

.PHONY: all build demo test clean

all: build

build:
	bash tools/setup.sh
	@if [ ! -f $(BUILD_DIR)/meson-private/coredata.dat ]; then \
		echo "meson setup $(BUILD_DIR)"; meson setup $(BUILD_DIR); \
	fi
	meson compile -C $(BUILD_DIR)

demo: build
	./$(BUILD_DIR)/src/cli/tessera sim examples/h100-mig-walkthrough.yaml

test: build
	@rc=0; meson test -C $(BUILD_DIR) --print-errorlogs || rc=$$?; \
	python3 tools/ci/summarize.py $(BUILD_DIR) || rc=1; \
	exit $$rc

clean:
	rm -rf $(BUILD_DIR) build-ci-gcc build-ci-asan build-ci-tsan build-ci-fuzz
