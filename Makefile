# husk — one non-recursive Makefile.  Sources are picked up by directory:
#   common/*.c        -> build/libhusk-common.a  (error type, utils)
#   runtime/*.c       -> build/libhusk-runtime.a (OCI runtime library)
#   runtime/cli/*.c   -> the husk binary (command table and commands)
#   image/*.c         -> build/libhusk-image.a   (OCI image library)
#   image/cli/*.c     -> husk's `image` verbs, linked into the husk binary
#   test/unit/test_*.c -> one cmocka binary each
PREFIX ?= /usr/local
BUILD ?= build
CC ?= gcc

PKGS := jansson libseccomp libcap libarchive libcurl libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow \
	-fno-strict-aliasing -D_GNU_SOURCE -Iinclude -I. $(PKG_CFLAGS) -MMD -MP
LDFLAGS ?=
LIBS := $(PKG_LIBS)

COMMON_SRCS := $(wildcard common/*.c)
RUNTIME_SRCS := $(wildcard runtime/*.c)
IMAGE_SRCS := $(wildcard image/*.c)
HUSK_SRCS := $(wildcard runtime/cli/*.c image/cli/*.c)
UNIT_SRCS := $(wildcard test/unit/test_*.c)

objs = $(patsubst %.c,$(BUILD)/%.o,$(1))

COMMON_LIB := $(BUILD)/libhusk-common.a
RUNTIME_LIB := $(BUILD)/libhusk-runtime.a
IMAGE_LIB := $(BUILD)/libhusk-image.a
LIBS_ALL := $(IMAGE_LIB) $(RUNTIME_LIB) $(COMMON_LIB)
HUSK := $(BUILD)/husk
UNIT_TESTS := $(patsubst test/unit/%.c,$(BUILD)/test/unit/%,$(UNIT_SRCS))

.PHONY: all deps build test unit-test integration-test run bench clean format format-check install

all: build

deps:
	@./hack/deps.sh

build: $(HUSK)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(COMMON_LIB): $(call objs,$(COMMON_SRCS))
	@rm -f $@
	ar rcs $@ $^

$(RUNTIME_LIB): $(call objs,$(RUNTIME_SRCS))
	@rm -f $@
	ar rcs $@ $^

$(IMAGE_LIB): $(call objs,$(IMAGE_SRCS))
	@rm -f $@
	ar rcs $@ $^

$(HUSK): $(call objs,$(HUSK_SRCS)) $(LIBS_ALL)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/test/unit/%: $(BUILD)/test/unit/%.o $(LIBS_ALL)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lcmocka

# `make test`: install what is missing, build, run every test, print one
# summary line at the end.
test: deps
	$(MAKE) --no-print-directory build $(UNIT_TESTS)
	./test/run-all.sh $(BUILD)

unit-test: build $(UNIT_TESTS)
	./test/run-all.sh --unit-only $(BUILD)

integration-test: build
	./test/run-all.sh --integration-only $(BUILD)

# `make run`: install, build, and run a demo container until huskd exists.
run: deps
	$(MAKE) --no-print-directory build
	./hack/demo.sh $(BUILD)

bench: deps
	$(MAKE) --no-print-directory build
	./hack/bench.sh $(BUILD)

install: build
	install -D -m 0755 $(HUSK) $(DESTDIR)$(PREFIX)/bin/husk

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
