# kpgpud — GNU make, parallel-safe.
#
#   make            release build into build/bin
#   make check-fast unit tests, pure modules, fuzz corpus replay (< 2 min)
#   make check      test build (fault points on) + every test, in parallel
#   make check-all  check + asan + the long fault run, red team, study,
#                   Debian package and OCI image checks (what CI runs)
#   make asan       ASan+UBSan build + the same tests
#   make fuzz       libFuzzer targets (FUZZ_SECONDS each, default 60)
#   make demo       the walkthrough on the bundled API simulator
#   make bench      benchmarks (figures, not assertions)
#   make study      the sharing-mode study into study/out (STUDY_QUICK=1: short)
#   make install    PREFIX=/usr/local DESTDIR=
#   make deb        Debian package into build/ (make deb-check: + its test)
#   make image      OCI image into build/ (make image-check: + its test)

VERSION    := 0.1.0
PREFIX     ?= /usr/local
DESTDIR    ?=
VARIANT    ?= release
FUZZ_SECONDS ?= 60

PKGS := libevent libevent_openssl libevent_pthreads openssl msgpack \
	libcurl jansson sqlite3 yaml-0.1

ifeq ($(VARIANT),release)
OUT      := build
VCFLAGS  := -O2
VLDFLAGS :=
else ifeq ($(VARIANT),test)
OUT      := build/test
VCFLAGS  := -O2 -DKPGPUD_FAULTS
VLDFLAGS :=
else ifeq ($(VARIANT),asan)
OUT      := build/asan
VCFLAGS  := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all -DKPGPUD_FAULTS
VLDFLAGS := -fsanitize=address,undefined
else
$(error VARIANT must be release, test or asan)
endif

# Evaluated lazily, so 'make deps' works before pkg-config knows anything.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))

CC       ?= cc
CFLAGS   ?=
KCFLAGS   = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g \
	-Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
	-fstack-protector-strong -D_FORTIFY_SOURCE=2 \
	-DKPGPUD_VERSION='"$(VERSION)"' -I. $(VCFLAGS) $(PKG_CFLAGS) $(CFLAGS)
KLDFLAGS  = $(VLDFLAGS) -Wl,-z,relro,-z,now $(LDFLAGS)

DAEMONS  := kpgpud-admit kpgpud-sync kpgpud-quota
PROGS    := $(DAEMONS) kpgpuctl

# Modules. Each is an archive $(OUT)/lib/libkpgpud-MOD.a of its objects and
# names the pkg-config packages those objects call; a program links only the
# modules it uses (uses_PROG) and only their libraries, so the privilege split
# holds in the binaries too: kpgpud-admit has no libsqlite3, libcurl or
# libyaml (tests/integration/t_link_sets checks with ldd).
MODULES  := common kube ipc cache $(PROGS)
srcs_common := $(wildcard common/*.c)
srcs_kube   := $(wildcard kube/*.c)
srcs_ipc    := $(wildcard ipc/*.c)
srcs_cache  := $(wildcard cache/*.c)
$(foreach p,$(PROGS),$(eval srcs_$(p) := \
	$(filter-out %/main.c,$(wildcard $(p)/*.c))))
pkgs_common       := libevent jansson
pkgs_kube         := libcurl yaml-0.1 libevent jansson
pkgs_ipc          := libevent msgpack
pkgs_cache        := sqlite3
pkgs_kpgpud-admit := libevent libevent_pthreads openssl jansson
pkgs_kpgpud-sync  := libevent jansson
pkgs_kpgpud-quota := libevent jansson
pkgs_kpgpuctl     := jansson
uses_kpgpud-admit := kpgpud-admit ipc common
uses_kpgpud-sync  := kpgpud-sync cache kube ipc common
uses_kpgpud-quota := kpgpud-quota cache kube ipc common
# kpgpuctl reuses the pure parts of admit (review, patch), quota (plan) and
# sync (ledger: times); from those archives the linker takes only the
# objects it calls.
uses_kpgpuctl     := kpgpuctl kpgpud-admit kpgpud-quota kpgpud-sync ipc common
mod_lib   = $(OUT)/lib/libkpgpud-$(1).a
mod_objs  = $(patsubst %.c,$(OUT)/obj/%.o,$(srcs_$(1)))
# the libraries of a list of modules, for the link line
mods_libs = $(shell pkg-config --libs $(sort $(foreach m,$(1),$(pkgs_$(m))))) \
	-lpthread -lm
ALL_MOD_LIBS := $(foreach m,$(MODULES),$(call mod_lib,$(m)))
# every module: what unit tests and test tools link
ALL_LINK  = -Wl,--start-group $(ALL_MOD_LIBS) -Wl,--end-group \
	$(call mods_libs,$(MODULES))
# a program is built once its main.c exists
BINS     := $(foreach p,$(PROGS),$(if $(wildcard $(p)/main.c),$(OUT)/bin/$(p)))

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(OUT)/tests/%)
HARNESS    := $(OUT)/obj/tests/unit/harness.o
TOOL_SRCS  := $(wildcard tests/tools/*.c)
TOOL_BINS  := $(TOOL_SRCS:tests/tools/%.c=$(OUT)/tests/%)

.SECONDARY:
.DELETE_ON_ERROR:

.PHONY: all deps check check-fast check-all test-build asan fuzz demo bench \
	install clean unit integration faults faults-full redteam study deb \
	deb-check image image-check

all: $(BINS)

deps:
	@scripts/deps --install

$(OUT)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(KCFLAGS) -MMD -MP -c $< -o $@

$(foreach m,$(MODULES),$(eval $(call mod_lib,$(m)): $(call mod_objs,$(m))))
$(ALL_MOD_LIBS):
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

# A program links its own objects directly (so weak references and
# constructors in them count), then the archives of the other modules it
# uses, then those modules' libraries and nothing else.
prog_objs = $(patsubst %.c,$(OUT)/obj/%.o,$(wildcard $(1)/*.c))
prog_mods = $(filter-out $(1),$(uses_$(1)))
.SECONDEXPANSION:
$(OUT)/bin/%: $$(call prog_objs,$$*) \
	$$(foreach m,$$(call prog_mods,$$*),$$(call mod_lib,$$(m)))
	@mkdir -p $(@D)
	$(CC) $(KLDFLAGS) -o $@ $(filter %.o,$^) \
		-Wl,--start-group $(filter %.a,$^) -Wl,--end-group \
		$(call mods_libs,$(uses_$*))

$(OUT)/tests/%: $(OUT)/obj/tests/unit/%.o $(HARNESS) $(ALL_MOD_LIBS)
	@mkdir -p $(@D)
	$(CC) $(KLDFLAGS) -o $@ $< $(HARNESS) $(ALL_LINK)

$(OUT)/tests/%: $(OUT)/obj/tests/tools/%.o $(ALL_MOD_LIBS)
	@mkdir -p $(@D)
	$(CC) $(KLDFLAGS) -o $@ $< $(ALL_LINK)

test-build: $(BINS) $(UNIT_BINS) $(TOOL_BINS)

# The test tiers. tests/run runs programs in parallel (TEST_JOBS, default
# its own: CPUs + 1) and lists the slowest; KPGPUD_TIMEOUT_SCALE widens
# every bound on a slow machine.
#   check-fast  while editing: the unit tests (pure modules, the fuzz
#               corpora replayed)
#   check       before submitting (README's test command): every test
#   check-all   what CI runs: check, then the same tests under ASan+UBSan,
#               the long fault run, the red team, the study, the package
#               and the image
TEST_JOBS ?=
RUN_JOBS = $(if $(TEST_JOBS),-j $(TEST_JOBS))
# make check runs two programs per CPU (its tests mostly wait on daemons:
# 675 s against 883 s at CPUs + 1 on 2 cores); the ASan tier keeps the
# runner's default, CPUs + 1, its programs being three times the CPU
CHECK_JOBS = -j $(if $(TEST_JOBS),$(TEST_JOBS),$(shell echo $$(( $$(nproc) * 2 ))))
# the test build uses every CPU unless make was already given -j
BUILD_JOBS = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc))
ASAN_TIMEOUT_SCALE ?= 3

check-fast:
	@scripts/deps --check
	$(MAKE) $(BUILD_JOBS) VARIANT=test test-build
	tests/run $(RUN_JOBS) build/test unit

check:
	@scripts/deps --check
	$(MAKE) $(BUILD_JOBS) VARIANT=test test-build
	tests/run $(CHECK_JOBS) build/test

# One after another, the first failure stops it; only the long fault run
# and the red team, which mostly wait on their stacks, run side by side
# (each to its own log, printed when both are done).
check-all:
	$(MAKE) check
	$(MAKE) deb-check
	$(MAKE) image-check
	$(MAKE) asan
	$(MAKE) VARIANT=test test-build
	@mkdir -p build/test; \
	$(MAKE) faults-full >build/test/faults-full.log 2>&1 & f=$$!; \
	KPGPUD_DEV_UID_BASE=64730 $(MAKE) redteam >build/test/redteam.log 2>&1; r=$$?; \
	wait $$f; fr=$$?; \
	echo "== make faults-full (exit $$fr)"; tail -n 40 build/test/faults-full.log; \
	echo "== make redteam (exit $$r)"; tail -n 60 build/test/redteam.log; \
	test $$fr -eq 0 && test $$r -eq 0
	$(MAKE) study

# asan: the sanitizers slow every daemon about threefold, so the bounds
# are scaled by ASAN_TIMEOUT_SCALE unless KPGPUD_TIMEOUT_SCALE is set.
asan:
	@scripts/deps --check
	$(MAKE) $(BUILD_JOBS) VARIANT=asan test-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	KPGPUD_TIMEOUT_SCALE=$${KPGPUD_TIMEOUT_SCALE:-$(ASAN_TIMEOUT_SCALE)} \
	tests/run $(RUN_JOBS) build/asan

unit:
	$(MAKE) $(BUILD_JOBS) VARIANT=test test-build
	tests/run $(RUN_JOBS) build/test unit

integration:
	$(MAKE) $(BUILD_JOBS) VARIANT=test test-build
	tests/run $(RUN_JOBS) build/test integration

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
fuzz:
	@scripts/deps --check
	scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_SRCS:tests/fuzz/%.c=%)

# faults: every daemon under injected faults while under load (short mode;
# FAULTS_FULL=1 for the long run).
faults:
	@scripts/deps --check
	$(MAKE) VARIANT=test test-build
	scripts/faults build/test

faults-full:
	@scripts/deps --check
	$(MAKE) VARIANT=test test-build
	FAULTS_FULL=1 scripts/faults build/test

# redteam: the adversarial suite as a tenant, every configuration (the
# default must show no escape; the others exactly their expected ones).
REDTEAM_CONFIGS ?= default,fail-policy,strict-off,no-policy,fail-policy-no-policy,strict-off-no-policy
redteam:
	@scripts/deps --check
	$(MAKE) VARIANT=test test-build
	/usr/bin/python3 tests/redteam/redteam.py build/test \
	    --config $(REDTEAM_CONFIGS) --markdown build/test/redteam.md

demo:
	@scripts/deps --check
	$(MAKE) all
	scripts/demo

bench:
	@scripts/deps --check bench
	$(MAKE) all
	scripts/bench

study:
	@scripts/deps --check
	study/run

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(wildcard man/*.8) $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 $(wildcard man/*.1) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(wildcard man/*.5) $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(PREFIX)/share/kpgpud
	install -m 0644 deploy/base/admission-policy.yaml \
		deploy/components/policy-injection/mutating-policy.yaml $(DESTDIR)$(PREFIX)/share/kpgpud/
	@if [ -d systemd ] && ls systemd/*.service >/dev/null 2>&1; then \
		install -d $(DESTDIR)$(PREFIX)/lib/systemd/system \
			$(DESTDIR)$(PREFIX)/lib/sysusers.d \
			$(DESTDIR)$(PREFIX)/lib/tmpfiles.d; \
		install -m 0644 systemd/*.service systemd/*.socket systemd/*.target \
			$(DESTDIR)$(PREFIX)/lib/systemd/system/; \
		install -m 0644 systemd/kpgpud.sysusers \
			$(DESTDIR)$(PREFIX)/lib/sysusers.d/kpgpud.conf; \
		install -m 0644 systemd/kpgpud.tmpfiles \
			$(DESTDIR)$(PREFIX)/lib/tmpfiles.d/kpgpud.conf; \
	fi

# deb: the Debian package (debian/), built from a copy of the tree so that
# dpkg-buildpackage leaves the checkout alone; lintian runs on the result.
DEB := build/kpgpud_$(VERSION)-1_$(shell dpkg --print-architecture 2>/dev/null)
deb:
	@scripts/deps --check
	rm -rf build/deb && mkdir -p build/deb/kpgpud-$(VERSION)
	tar -C . --exclude=./build --exclude=./.git --exclude='./study/out' \
		--exclude=./tools \
		-cf - . | tar -C build/deb/kpgpud-$(VERSION) -xf -
	cd build/deb/kpgpud-$(VERSION) && dpkg-buildpackage -us -uc -b \
		-j$$(nproc) >../build.log 2>&1 || { tail -n 40 ../build.log; exit 1; }
	cp build/deb/kpgpud_$(VERSION)-1_*.deb build/
	lintian --fail-on error,warning --tag-display-limit 0 $(DEB).deb

# image: the OCI image build/kpgpud-VERSION.oci.tar (scripts/image) of the
# release binaries; image-check runs what is in it (tests/package/t_image).
image: all
	@scripts/deps --check
	scripts/image $(VERSION) $(OUT)/bin build

image-check: image
	tests/package/t_image build/kpgpud-$(VERSION).oci.tar

# deb-check: the package installed into a scratch root (tests/package/).
deb-check: deb
	tests/package/t_deb $(DEB).deb

clean:
	rm -rf build

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)
