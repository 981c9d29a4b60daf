# husk — one non-recursive Makefile.  Sources are picked up by directory:
#   common/*.c        -> build/libhusk-common.a  (error type, utils)
#   runtime/*.c, runtime/cgroup/*.c, runtime/spec/*.c
#                     -> build/libhusk-runtime.a (OCI runtime library)
#   runtime/cli/*.c   -> the husk binary (command table and commands)
#   image/*.c, image/registry/*.c -> build/libhusk-image.a (OCI image library)
#   image/cli/*.c, cri/cli/*.c -> build/husk-image, the program husk executes
#                        for its `image`, `container` and `cdi` verbs, so that
#                        the runtime (static) never links libcurl/libarchive
#   cri/cli/cdi_hook_cli.c, cri/cli/hook_plugin_main.c, cri/cdi/hook.c
#                     -> build/husk-hook, the small program of the CDI
#                        hooks (`husk cdi-hook`, run at container creates)
#   cri/{spec,config,pod,container,stats,server}/*.c
#                     -> build/libhusk-cri.a     (CRI translation, shared with huskd),
#                        with the libraries in its rooms: cri/rpc/ (gRPC server),
#                        cri/cni/ (CNI client), cri/cdi/ and cri/streaming/
#   test/unit/test_*.c -> one cmocka binary each
PREFIX ?= /usr/local
BUILD ?= build
CC ?= gcc

# The runtime links only what it needs: every library costs start-up time
# in `husk create`.  Image and CRI code adds the rest.
RUNTIME_PKGS := jansson libseccomp libcap
IMAGE_PKGS := libarchive libcurl libcrypto
CRI_PKGS := grpc_unsecure libprotobuf-c zlib yaml-0.1
PKG_CFLAGS := $(shell pkg-config --cflags $(RUNTIME_PKGS) $(IMAGE_PKGS) $(CRI_PKGS) 2>/dev/null)
RUNTIME_PKG_LIBS := $(shell pkg-config --libs $(RUNTIME_PKGS) 2>/dev/null)
IMAGE_PKG_LIBS := $(shell pkg-config --libs $(IMAGE_PKGS) 2>/dev/null)
CRI_PKG_LIBS := $(shell pkg-config --libs $(CRI_PKGS) 2>/dev/null)

# CFLAGS and LDFLAGS given on the command line (`make CFLAGS=-O0`) add to
# husk's own flags rather than replace them.  SANITIZE=address,undefined
# builds every program but the static husk-pause with those sanitizers
# (`make sanitize` runs the unit and CRI end-to-end tests so).
CFLAGS ?= -O2 -g
LDFLAGS ?=
SANITIZE ?=
SAN_FLAGS = $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer)
override CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow \
	-fno-strict-aliasing -fPIC -D_GNU_SOURCE -Iinclude -I. $(PKG_CFLAGS) -MMD -MP $(SAN_FLAGS)
override LDFLAGS += $(SAN_FLAGS)
LIBS := $(RUNTIME_PKG_LIBS) $(IMAGE_PKG_LIBS) $(CRI_PKG_LIBS) -lpthread

comma := ,
COMMON_SRCS := $(wildcard common/*.c)
RUNTIME_SRCS := $(wildcard runtime/*.c runtime/cgroup/*.c runtime/spec/*.c runtime/lsm/*.c)
IMAGE_SRCS := $(wildcard image/*.c image/registry/*.c)
# The CRI messages: protoc-c output generated into build/gen at build time
# from husk's own cri/proto/api.proto, never edited by hand.
PROTO := $(wildcard cri/proto/api.proto)
PROTO_C := $(if $(PROTO),$(BUILD)/gen/cri/proto/api.pb-c.c)
PROTO_O := $(if $(PROTO),$(BUILD)/gen/cri/proto/api.pb-c.o)
# cri/rpc/ and cri/cni/ know nothing of CRI (hack/check-layers.sh keeps it
# so): they are built without the generated messages.
CRI_LIB_SRCS := $(wildcard cri/rpc/*.c cri/cni/*.c)
CRI_SRCS := $(wildcard $(addsuffix /*.c,cri/config cri/spec cri/pod cri/container cri/stats cri/server cri/cdi cri/streaming))
HUSKD_SRCS := $(wildcard cri/huskd/*.c)
HUSK_SRCS := $(wildcard runtime/cli/*.c)
HOOK_PLUGIN_SRCS := $(wildcard cri/cli/cdi_hook_cli.c cri/cli/hook_plugin_main.c)
# main() of both plugin programs (husk/plugin.h).
PLUGIN_ENTRY := cri/cli/plugin_entry.c
PLUGIN_SRCS := $(filter-out $(HOOK_PLUGIN_SRCS),$(wildcard image/cli/*.c cri/cli/*.c))
UNIT_SRCS := $(wildcard test/unit/test_*.c)
MONITOR_SRCS := $(wildcard cri/monitor/*.c)
PAUSE_SRCS := $(wildcard cri/pause/*.c)

objs = $(patsubst %.c,$(BUILD)/%.o,$(1))

COMMON_LIB := $(BUILD)/libhusk-common.a
RUNTIME_LIB := $(BUILD)/libhusk-runtime.a
IMAGE_LIB := $(BUILD)/libhusk-image.a
CRI_LIB := $(BUILD)/libhusk-cri.a
LIBS_ALL := $(CRI_LIB) $(IMAGE_LIB) $(RUNTIME_LIB) $(COMMON_LIB)
HUSK := $(BUILD)/husk
PLUGIN := $(BUILD)/husk-image
HOOK_PLUGIN := $(BUILD)/husk-hook
HUSKD := $(BUILD)/huskd
MONITOR := $(BUILD)/husk-monitor
PAUSE := $(BUILD)/husk-pause
UNIT_TESTS := $(patsubst test/unit/%.c,$(BUILD)/test/unit/%,$(UNIT_SRCS))

.PHONY: all deps deps-run deps-test deps-bench build test unit-test integration-test vm-test run demo bench clean format format-check \
	check-layers conformance install sanitize unit-bins e2e-helpers fuzz

all: build

# hack/deps.sh installs what is missing: `run` (build, huskd's pods), `test`
# (that and the tests' tools), `bench` (and hyperfine); `make deps`: all.
deps:
	@./hack/deps.sh
deps-run:
	@./hack/deps.sh run
deps-test:
	@./hack/deps.sh test
deps-bench:
	@./hack/deps.sh bench

build: $(HUSK) $(if $(PLUGIN_SRCS),$(PLUGIN)) $(if $(HOOK_PLUGIN_SRCS),$(HOOK_PLUGIN)) $(if $(HUSKD_SRCS),$(HUSKD)) $(if $(MONITOR_SRCS),$(MONITOR)) \
	$(if $(PAUSE_SRCS),$(PAUSE))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c -o $@ $<

$(COMMON_LIB): $(call objs,$(COMMON_SRCS))
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

$(RUNTIME_LIB): $(call objs,$(RUNTIME_SRCS))
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

$(IMAGE_LIB): $(call objs,$(IMAGE_SRCS))
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

# GNU C predefines `linux`, and CRI has fields named linux: plain C11 here.
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: %.proto
	@mkdir -p $(BUILD)/gen/$(dir $<)
	@echo "  PROTOC  $<"
	@protoc-c --c_out=$(BUILD)/gen -I. $<

$(PROTO_O): $(PROTO_C)
	@echo "  CC      $<"
	@$(CC) $(filter-out -std=gnu11 -D_GNU_SOURCE,$(CFLAGS)) -std=c11 -I$(BUILD)/gen -c -o $@ $<

# Unit tests of CRI code (test/unit/test_cri_*.c) see the generated messages.
CRI_UNIT_OBJS := $(call objs,$(wildcard test/unit/test_cri_*.c))
$(call objs,$(CRI_SRCS) $(HUSKD_SRCS)) $(CRI_UNIT_OBJS): override CFLAGS += -I$(BUILD)/gen -Ulinux
$(call objs,$(CRI_SRCS) $(HUSKD_SRCS)) $(CRI_UNIT_OBJS): $(PROTO_C)

$(CRI_LIB): $(call objs,$(CRI_SRCS) $(CRI_LIB_SRCS)) $(PROTO_O)
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

# Debug info goes to husk.debug (gdb finds it by the debuglink): create,
# run and exec copy the binary into a sealed memfd, so every byte of it
# costs start-up time.  husk is a static PIE (ASLR kept) where the -dev
# packages' archives of jansson, libseccomp, libcap and libc are here: it
# is loaded twice per create, run and exec (the re-exec from the memfd),
# and the loader's work for libc alone (mapping, relocating, the faults
# on its pages) was ~0.7 ms of each load on this PVM guest: `run` of
# /bin/true took 15.5 ms dynamic and 13.7 ms static, in the same bench.
# Without the archives, or with sanitizers (their runtimes are shared
# objects), husk links what it can statically.
RUNTIME_ARCHIVES := $(wildcard $(addprefix /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)/,libjansson.a libseccomp.a libcap.a))
HUSK_STATIC := $(and $(word 3,$(RUNTIME_ARCHIVES)),$(filter /%,$(shell $(CC) -print-file-name=libc.a 2>/dev/null)),$(if $(SANITIZE),,yes))
RUNTIME_STATIC_LIBS := $(if $(word 3,$(RUNTIME_ARCHIVES)),-Wl$(comma)-Bstatic $(RUNTIME_PKG_LIBS) -Wl$(comma)-Bdynamic,$(RUNTIME_PKG_LIBS))
$(HUSK): $(call objs,$(HUSK_SRCS)) $(RUNTIME_LIB) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) $(if $(HUSK_STATIC),-static-pie) -o $@ $^ $(if $(HUSK_STATIC),$(RUNTIME_PKG_LIBS),$(RUNTIME_STATIC_LIBS))
	@objcopy --only-keep-debug $@ $@.debug
	@objcopy --strip-debug --strip-unneeded --add-gnu-debuglink=$@.debug $@

$(PLUGIN): $(call objs,$(PLUGIN_SRCS)) $(LIBS_ALL)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(LIBS)

# The CDI hooks run at every create of a container given such a device:
# hook.c, the common library and jansson only (~1 ms to load, where
# husk-image's 47 libraries cost ~14 ms), static like husk where husk is:
# `husk cdi-hook` then costs what it did when husk was dynamic and
# dlopened a husk-hook.so (10.6-11.2 ms against 10.7-11.2 ms per hook,
# bash's fork included; 11.5-14.3 ms with a dynamic husk-hook).
$(HOOK_PLUGIN): $(call objs,$(HOOK_PLUGIN_SRCS) $(PLUGIN_ENTRY) cri/cdi/hook.c) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) $(if $(HUSK_STATIC),-static-pie) -Wl,--as-needed -o $@ $^ $(shell pkg-config --libs jansson)

# -z now: every symbol bound at start, once; lazily bound, each ExecSync
# child (a fork of huskd) would look up again what it calls first.
$(HUSKD): $(call objs,$(HUSKD_SRCS)) $(LIBS_ALL)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -Wl,-z,now -o $@ $^ $(LIBS)

# One monitor per container, for the container's whole life: runtime and
# common code and jansson only (no gRPC, no curl), so that it stays small;
# static where husk is (250 monitors: 204 KiB PSS each against 256 KiB
# dynamic, and no loader run at each container start).
$(MONITOR): $(call objs,$(MONITOR_SRCS)) $(RUNTIME_LIB) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) $(if $(HUSK_STATIC),-static-pie) -o $@ $^ $(shell pkg-config --libs jansson)

# pid 1 of pods that share a PID namespace: static, no library, so that
# each costs ~100 KiB rather than a copy of huskd (and no sanitizer runtime,
# which cannot be linked statically).
$(PAUSE): SAN_FLAGS :=
$(PAUSE): $(call objs,$(PAUSE_SRCS))
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -static -o $@ $^
	@strip $@

# The monitor's log and exit code is in no library: its unit test links the
# objects, ahead of the libraries they use.
$(BUILD)/test/unit/test_monitor_log: $(BUILD)/test/unit/test_monitor_log.o \
		$(call objs,cri/monitor/log.c cri/monitor/logfile.c cri/monitor/exit.c) $(RUNTIME_LIB) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs jansson) -lcmocka

# The debug CLI's output and exit codes live in the plugin, in no library.
$(BUILD)/test/unit/test_cli_fmt: $(BUILD)/test/unit/test_cli_fmt.o $(call objs,cri/cli/cli_fmt.c) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs jansson) -lcmocka

# The attach socket's both ends: the monitor's objects and huskd's client.
$(BUILD)/test/unit/test_monitor_attach: $(BUILD)/test/unit/test_monitor_attach.o \
		$(call objs,cri/monitor/attach.c cri/container/attach.c) $(COMMON_LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

$(BUILD)/test/unit/%: $(BUILD)/test/unit/%.o $(LIBS_ALL)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lcmocka

# libFuzzer targets (test/fuzz/fuzz_*.c), built by clang with ASan and
# UBSan from the few sources each names below; test/integration/test_fuzz.sh
# runs each for a bounded time (HUSK_FUZZ_SECONDS).
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -I.
FUZZ_TARGETS := $(patsubst test/fuzz/%.c,$(BUILD)/test/fuzz/%,$(wildcard test/fuzz/fuzz_*.c))

$(BUILD)/test/fuzz/fuzz_http_head: cri/streaming/http_head.c

$(BUILD)/test/fuzz/%: test/fuzz/%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	@$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

fuzz: $(FUZZ_TARGETS)

# Static programs the e2e tests run inside pods from a hostPath volume,
# whatever the image (test_cri_gvisor: a syscall gVisor lacks).  No
# sanitizer: its runtime cannot be linked statically.
E2E_HELPERS := $(BUILD)/test/e2e/gvisor_syscall

$(BUILD)/test/e2e/%: test/e2e/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) -O2 -Wall -Wextra -Werror -static -o $@ $<

e2e-helpers: $(E2E_HELPERS)

# `make test`: install what is missing, build, run every test, print one
# summary line at the end.
test: deps-test
	$(MAKE) --no-print-directory format-check check-layers build $(UNIT_TESTS) $(FUZZ_TARGETS) $(E2E_HELPERS)
	./test/run-all.sh $(BUILD)

unit-bins: $(UNIT_TESTS)

unit-test: build $(UNIT_TESTS)
	./test/run-all.sh --unit-only $(BUILD)

integration-test: build $(E2E_HELPERS)
	./test/run-all.sh --integration-only $(BUILD)

# `make run`: install, build, and start huskd in the foreground with its
# built-in defaults (unix:///run/husk/husk.sock, /var/lib/husk, /run/husk),
# or /etc/husk/huskd.json when it exists.
# A pod network for huskd where the CNI dir has none (hack/default-network.sh:
# a bridge of its own, husk0; an existing config is never touched).  Point
# CNI_CONF_DIR at the cni_conf_dir of your huskd.json if it is elsewhere.
CNI_CONF_DIR ?= /etc/cni/net.d

run: deps-run
	$(MAKE) --no-print-directory build
	./hack/default-network.sh "$(CNI_CONF_DIR)"
	@echo "huskd: serving CRI v1 (Ctrl-C stops it; 'make demo' runs a container)"
	$(HUSKD)

# A busybox container through `husk run`, no daemon.
demo: deps
	$(MAKE) --no-print-directory build
	./hack/demo.sh $(BUILD)

# Each benchmark's output goes to the terminal and to $(BUILD)/bench.log;
# hack/bench-table.sh then puts every BENCH| line in one table.
# The density mode's steady phase per runtime and pod count (issue 30: 5 min).
DENSITY_SECONDS ?= 300
BENCH_LOG = bash -o pipefail -c '"$$@" 2>&1 | tee -a $(BUILD)/bench.log' bench

bench: deps-bench
	$(MAKE) --no-print-directory build
	: >$(BUILD)/bench.log
	$(BENCH_LOG) ./hack/bench.sh $(BUILD)
	$(BENCH_LOG) ./hack/bench-pull.sh $(BUILD)
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) ./hack/bench-cri.sh
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) ./hack/bench-cri.sh --cdi
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) ./hack/bench-cri.sh --stream
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) ./hack/bench-cri.sh --scale
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) DENSITY_SECONDS=$(DENSITY_SECONDS) ./hack/bench-cri.sh --density 100
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) DENSITY_SECONDS=$(DENSITY_SECONDS) ./hack/bench-cri.sh --density 250
	$(BENCH_LOG) env BUILD_DIR=$(BUILD) ./hack/crash-cri.sh 10
	$(BENCH_LOG) ./hack/vm-test.sh --bench $(BUILD)
	./hack/bench-table.sh $(BUILD)/bench.log

# ASan+UBSan: everything but the static husk-pause built so in BUILD-sanitize,
# then the unit tests and the CRI end-to-end tests under it; a sanitizer
# report fails the run (hack/sanitize.sh).
sanitize: deps
	$(MAKE) --no-print-directory BUILD=$(BUILD)-sanitize SANITIZE=address,undefined build unit-bins e2e-helpers
	./hack/sanitize.sh $(BUILD)-sanitize

# critest (cri-tools v1.29) against a huskd of its own, offline; critest and
# crictl come from PATH or CRITEST=, CRICTL= (husk keeps neither).
conformance: deps
	$(MAKE) --no-print-directory build
	./hack/conformance.sh $(BUILD)

# The cgroup v2 tests, in a qemu VM (also part of `make test`).
vm-test: deps-test
	$(MAKE) --no-print-directory build
	./hack/vm-test.sh $(BUILD)

# The binaries, the plugins, huskd's systemd unit (PREFIX/lib/systemd/system,
# on systemd's search path for /usr/local too; SYSTEMD_UNIT_DIR= moves it)
# and an example config (PREFIX/share/husk; huskd reads
# /etc/husk/huskd.json when it exists).  `systemctl daemon-reload` and
# `systemctl enable --now huskd` start it.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
install: build
	install -D -m 0755 $(HUSK) $(DESTDIR)$(PREFIX)/bin/husk
	$(if $(HUSKD_SRCS),install -D -m 0755 $(HUSKD) $(DESTDIR)$(PREFIX)/bin/huskd)
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|g' cri/huskd/huskd.service.in >$(DESTDIR)$(SYSTEMD_UNIT_DIR)/huskd.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/huskd.service
	install -D -m 0644 cri/huskd/huskd.json.example $(DESTDIR)$(PREFIX)/share/husk/huskd.json.example
	$(if $(MONITOR_SRCS),install -D -m 0755 $(MONITOR) $(DESTDIR)$(PREFIX)/bin/husk-monitor)
	$(if $(PAUSE_SRCS),install -D -m 0755 $(PAUSE) $(DESTDIR)$(PREFIX)/bin/husk-pause)
	$(if $(PLUGIN_SRCS),install -D -m 0755 $(PLUGIN) $(DESTDIR)$(PREFIX)/lib/husk/husk-image)
	$(if $(HOOK_PLUGIN_SRCS),install -D -m 0755 $(HOOK_PLUGIN) $(DESTDIR)$(PREFIX)/lib/husk/husk-hook)
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -D -m 0644 cri/huskd/huskd.8 $(DESTDIR)$(PREFIX)/share/man/man8/huskd.8
	install -D -m 0644 cri/huskd/huskd.json.5 $(DESTDIR)$(PREFIX)/share/man/man5/huskd.json.5
	$(HUSK) completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/husk

# Man pages and the bash completion come from the verbs' --help, the
# text their option tables print (hack/gen-man.sh, husk completion bash).
.PHONY: man
man: build
	@./hack/gen-man.sh $(HUSK) $(BUILD)/man
install: man

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h') && echo "  FORMAT  clean"

# The layers of DESIGN.md: which folder may include which (hack/check-layers.sh).
check-layers:
	@./hack/check-layers.sh && echo "  LAYERS  clean"


clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
