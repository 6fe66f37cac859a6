# The README's two commands:
#   make run   - install missing Debian packages, build, run kgpu (inventory, then the metrics agent) on a
#                simulated 8-GPU node for RUN_FOR seconds (0: until Ctrl-C)
#   make test  - install missing Debian packages, build the test control plane once per machine
#                (test/kube), build, run the whole test suite (plain and ASan+UBSan), then print each
#                phase's wall time and the compiler cache's hits (docs/build.md)
# and the container image:
#   make image - build, then the OCI image of build/'s kgpu, without a container engine
#                ($(IMAGE_DIR)/kgpu-<version>.oci.tar; docs/image.md)
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
NODE ?= examples/nodes/dgx-h100.yaml
RUN_FOR ?= 20
IMAGE_DIR ?= $(BUILD)/image
CMAKE_COMMON = -G Ninja

.PHONY: setup setup-tests build build-only build-asan build-asan-only run test test-plain test-asan image bench fuzz clean

setup:
	@scripts/setup.sh

# setup, and the real control plane the end-to-end tests run against (test/kube/README.md)
setup-tests:
	@scripts/setup.sh --test-tools

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DKGPU_SANITIZE=ON

build: setup build-only

build-only: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

build-asan: setup build-asan-only

build-asan-only: $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

run: build
	scripts/demo.sh $(BUILD) $(NODE) $(RUN_FOR)

test-plain: setup-tests build-only
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

# Both builds and suites, each phase timed, with the compiler cache's hits (scripts/test.sh; docs/build.md).
test:
	@MAKE="$(MAKE)" JOBS=$(JOBS) BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) scripts/test.sh

image: build
	scripts/build-image.sh $(BUILD) $(IMAGE_DIR)

BENCHES = read_model_bench gpu_bench metrics_bench agent_load device_plugin_bench informer_bench sched_latency lint_bench doctor_bench sched_live_replay

bench: build
	cmake --build $(BUILD) -j $(JOBS) --target $(BENCHES)
	$(BUILD)/bench/read_model_bench
	$(BUILD)/bench/gpu_bench
	$(BUILD)/bench/metrics_bench
	$(BUILD)/bench/agent_load 20 2000
	$(BUILD)/bench/device_plugin_bench
	bench/http_overload.py $(BUILD)
	bench/extender_hostile.py $(BUILD)
	scripts/kube-plane.sh >/dev/null && bench/kube_sched_bench.py $(BUILD)
	bench/config_memory.sh $(BUILD)
	$(BUILD)/bench/informer_bench 5000 100000 20000

# Fuzz every parser and wire decoder for FUZZ_TIME seconds each (tools/fuzz/README.md).
fuzz: setup
	tools/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
