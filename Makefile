# Newcomers: `make demo` runs the H100 MIG walkthrough, `make test` runs every test suite.
# Both install the Debian packages they need (tools/setup.sh), configure build/ once and compile;
# `make test` also builds the tests' real control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, Kueue, helm, the grpc-go fake kubelet) from their pinned Go
# modules once per machine (tools/peers.sh; the first time takes about 20 minutes on 2 cores).

BUILD_DIR := build

.PHONY: all build peers demo test replay image fuzz clean

all: build

build:
	bash tools/setup.sh
	@if [ ! -f $(BUILD_DIR)/meson-private/coredata.dat ]; then \
		echo "meson setup $(BUILD_DIR)"; meson setup $(BUILD_DIR); \
	fi
	meson compile -C $(BUILD_DIR)

peers:
	bash tools/peers.sh build

demo: build
	./$(BUILD_DIR)/src/cli/tessera sim examples/h100-mig-walkthrough.yaml

test: build peers
	@rc=0; meson test -C $(BUILD_DIR) --print-errorlogs || rc=$$?; \
	python3 tools/ci/summarize.py $(BUILD_DIR) || rc=1; \
	exit $$rc

# The fragmentation benchmark: every pod list of the Alibaba GPU trace, every policy, seeds 42-51.
TRACES := ../shared/traces/alibaba-gpu-v2023
replay: build
	mkdir -p $(BUILD_DIR)/replay
	./$(BUILD_DIR)/src/cli/tessera replay --nodes $(TRACES)/openb_node_list_gpu_node.csv \
		$(foreach p,$(wildcard $(TRACES)/openb_pod_list_*.csv),--pods $(p)) \
		--check-published 10 --csv $(BUILD_DIR)/replay/replay.csv --svg $(BUILD_DIR)/replay/replay.svg

# The container image without Docker (docs/image.md): build/image/oci and build/image/tessera-<version>.tar.
image: build
	BUILD_DIR=$(BUILD_DIR) bash tools/image.sh

# Every fuzz target for FUZZ_SECONDS each (default 10; FUZZ_SECONDS=3600 for the long campaign),
# in build-fuzz (clang-14, libFuzzer, ASan + UBSan). The committed corpora replay in `make test`.
FUZZ_SECONDS ?= 10
fuzz:
	bash tools/setup.sh
	@if [ ! -f build-fuzz/meson-private/coredata.dat ]; then \
		CC=clang-14 meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false; \
	fi
	meson compile -C build-fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash tools/fuzz.sh build-fuzz

clean:
	rm -rf $(BUILD_DIR) build-fuzz build-ci-gcc build-ci-asan build-ci-tsan build-ci-fuzz
