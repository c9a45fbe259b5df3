# ci: code-interpreter sandbox orchestrator.
#
#   make            build/ci-daemon and build/ci-ctl
#   make run        set up this machine for the daemon (deploy/setup.sh run: its packages,
#                   dockerd, redis, image), then run the daemon
#   make test       set up with the test toolchain too (deploy/setup.sh test), then every
#                   test (unit, sanitizers, valgrind, runner, integration)
#   make image      build the sandbox image when its recipe changed
#   make service-images  ci/daemon, ci/engine, ci/redis and the sandbox tarball (images/service/)
#   make test-deploy     the deploy suite (tests/deploy/), after service-images
#   make bench      benchmarks (not part of make test)
#   SANITIZE=1      build with AddressSanitizer and UBSan into build/asan/

CC ?= cc
PKGS := libevent libevent_openssl openssl libcurl yajl hiredis uuid
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
CFLAGS ?= -O2 -g
BUILD := build
ifeq ($(SANITIZE),1)
BUILD := build/asan
CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# llhttp (Debian's node-llhttp ships its C sources): built from where the
# package put them, into $(BUILD)/obj/llhttp/, without our warning set (it is
# not our code), and linked into everything that links the daemon's objects.
# Never copied into this repository. -isystem keeps its header out of -Werror.
LLHTTP_SRC_DIR ?= /usr/share/llhttp
LLHTTP_INC_DIR ?= /usr/share/include/llhttp
LLHTTP_NAMES := api http llhttp
# Strict mode (a compile-time switch in llhttp 8): CRLF after a chunk's data,
# no space before a header's colon, the stricter URL and header tables; for
# both of its users, the API server and the egress proxy.
LLHTTP_CFLAGS := -isystem $(LLHTTP_INC_DIR) -DLLHTTP_STRICT_MODE=1
LLHTTP_OBJS := $(LLHTTP_NAMES:%=$(BUILD)/obj/llhttp/%.o)

ALL_CFLAGS := -std=gnu11 -D_GNU_SOURCE -fno-strict-aliasing $(WARN) $(CFLAGS) $(PKG_CFLAGS) $(LLHTTP_CFLAGS) -MMD -MP

# lib/: what the daemon and ci-ctl share (errors, allocation, bounded JSON,
# capped buffers, codecs, clocks, deferred calls), one static archive that
# both programs, the unit tests and the fuzz targets link; docs/architecture.md.
LIB_SRCS := lib/err.c lib/xalloc.c lib/clock.c lib/json.c lib/buf.c lib/codec.c lib/defer.c lib/idprefix.c lib/wcwidth.c

# One file per responsibility; see docs/architecture.md.
DAEMON_LIB_SRCS := daemon/log.c daemon/config.c \
	daemon/session.c daemon/session_json.c daemon/digest.c daemon/api_requests.c daemon/frame.c daemon/capbuf.c daemon/exec_result.c \
	daemon/container_spec.c daemon/seccomp.c daemon/uid_range.c daemon/ipc_dir.c daemon/workspace_disk.c daemon/kernel_frame.c daemon/kernel.c daemon/files.c \
	daemon/netpolicy.c daemon/resolver.c daemon/egress_head.c daemon/egress.c daemon/proc.c daemon/network.c \
	daemon/curl_loop.c daemon/httpc.c daemon/fixer_prompt.c daemon/fixer.c daemon/fixer_target.c daemon/docker.c daemon/docker_api.c daemon/docker_json.c daemon/store.c daemon/store_sentinel.c daemon/http_head_scan.c daemon/http_guard.c daemon/http_reply.c \
	daemon/http_request.c daemon/http_server.c daemon/manager.c daemon/manager_create.c \
	daemon/manager_exec.c daemon/install.c daemon/manager_install.c daemon/manager_pip.c daemon/api_packages.c daemon/manager_teardown.c daemon/pool.c daemon/pool_demand.c daemon/manager_recovery.c daemon/manager_oneshot.c \
	daemon/quota.c daemon/store_quota.c daemon/fdbudget.c daemon/log_keyed.c daemon/procstat.c daemon/listen_guard.c daemon/api_route.c daemon/api.c daemon/api_probes.c \
	daemon/api_sessions.c daemon/api_exec.c daemon/api_files.c daemon/api_events.c daemon/api_load.c \
	daemon/apikey.c daemon/apikey_cache.c daemon/store_keys.c daemon/api_auth.c daemon/api_keys.c \
	daemon/api_version.c daemon/api_images.c daemon/tls.c \
	daemon/audit.c daemon/store_audit.c daemon/api_audit.c \
	daemon/api_access.c daemon/metrics_hist.c daemon/metrics.c \
	daemon/api_quota.c daemon/api_quota_gate.c \
	daemon/api_query.c daemon/api_wait.c daemon/runs.c daemon/run_flow.c daemon/run_ladder.c daemon/run_json.c daemon/store_runs.c daemon/api_runs.c \
	daemon/failure_sig.c daemon/fix_rules.c daemon/store_failures.c daemon/store_script.c daemon/api_failures.c \
	daemon/stateless.c daemon/stateless_seccomp.c \
	daemon/store_reviews.c daemon/api_reviews.c daemon/reviews.c daemon/webhook.c daemon/workflow.c \
	daemon/blobstore.c daemon/blobstore_dir.c daemon/blobstore_s3.c \
	daemon/snapshot.c daemon/snapshot_capture.c daemon/snapshot_restore.c \
	daemon/store_snapshots.c daemon/api_snapshots.c daemon/manager_snapshot.c \
	daemon/tar_scan.c daemon/snapshot_manifest.c
# Several nodes on one Redis (issue 15).
DAEMON_LIB_SRCS += daemon/cluster.c daemon/cluster_pick.c daemon/store_nodes.c daemon/api_cluster.c
# Forwarding to a session's owner (issue 15).
DAEMON_LIB_SRCS += daemon/forward_headers.c daemon/forward.c
# The MCP endpoint (issue 16).
DAEMON_LIB_SRCS += daemon/mcp_rpc.c daemon/api_mcp.c daemon/mcp_tools.c
DAEMON_SRCS := $(DAEMON_LIB_SRCS) daemon/main.c
include cli/cli.mk
UNIT_SRCS := $(wildcard tests/unit/*.c)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB_A := $(BUILD)/lib/libci.a
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/obj/%.o)
GEN_OBJS := $(BUILD)/obj/gen/seccomp_profile.o $(BUILD)/obj/gen/stateless_runner.o \
	$(BUILD)/obj/gen/review_page.o $(BUILD)/obj/gen/snapshot_vars.o
DAEMON_LIB_OBJS := $(DAEMON_LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(GEN_OBJS)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_OBJS := $(UNIT_SRCS:%.c=$(BUILD)/obj/%.o)

.PHONY: service-images test-deploy fidelity all lib tools run test unit image setup setup-run setup-test bench bench-scale soak fuzz fuzz-build clean format format-check man install
all: $(BUILD)/ci-daemon $(BUILD)/ci-ctl
lib: $(LIB_A)

# V=1 shows the full commands.
ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/ci-daemon: $(DAEMON_OBJS) $(GEN_OBJS) $(LLHTTP_OBJS) $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/ci-ctl: $(CLI_OBJS) $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/unit-tests: $(UNIT_OBJS) $(DAEMON_LIB_OBJS) $(LLHTTP_OBJS) $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Test tools: small programs over the daemon's objects that the Python
# suites drive (tests/tools/<name>.c -> build/tools/<name with dashes>, and
# the ASan build): fixer-probe, failure-tool, stateless-run, review-open.
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_NAMES := $(patsubst tests/tools/%.c,%,$(TOOL_SRCS))
TOOL_BINS := $(foreach t,$(TOOL_NAMES),$(BUILD)/tools/$(subst _,-,$(t)))
tools: $(TOOL_BINS)

define TOOL_RULE
$(BUILD)/tools/$(subst _,-,$(1)): $(BUILD)/obj/tests/tools/$(1).o $$(DAEMON_LIB_OBJS) $$(LLHTTP_OBJS) $$(LIB_A)
	@mkdir -p $$(dir $$@)
	@echo "  LD      $$@"
	$$(Q)$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(PKG_LIBS)
endef
$(foreach t,$(TOOL_NAMES),$(eval $(call TOOL_RULE,$(t))))

$(LIB_A): $(LIB_OBJS) $(BUILD)/obj/gen/version.o
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/obj/llhttp/%.o: $(LLHTTP_SRC_DIR)/%.c Makefile
	@mkdir -p $(dir $@)
	@echo "  CC      $< (third-party)"
	$(Q)$(CC) -std=gnu11 $(CFLAGS) $(LLHTTP_CFLAGS) -MMD -MP -c -o $@ $<

# lib/ and cli/ see lib/ only, so neither reaches into the daemon; the
# daemon and its tests see both (daemon files keep `#include "err.h"`).
SRC_INCLUDES = -Ilib $(if $(filter lib/% cli/%,$<),,-Idaemon)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) $(SRC_INCLUDES) -c -o $@ $<

# The version (lib/version.h): the release from VERSION, the commit from git
# at build time. The file is rewritten only when its text changes, so make
# with nothing changed rebuilds and relinks nothing; the text holds no date,
# so two builds of one commit are alike.
CI_VERSION_STR := $(shell cat VERSION 2>/dev/null || echo unknown)
CI_GIT_STR := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
.PHONY: version-force
build/gen/version.c: version-force
	@mkdir -p $(dir $@)
	$(Q){ echo '/* Generated by the Makefile from VERSION and git; do not edit. */'; \
	  echo '#include "version.h"'; \
	  echo 'const char ci_version[] = "$(CI_VERSION_STR)";'; \
	  echo 'const char ci_git[] = "$(CI_GIT_STR)";'; } > $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "  GEN     $@ ($(CI_VERSION_STR), git $(CI_GIT_STR))"; fi

# A text file of the repository as one C string named $(1) (no tool beyond
# sed): the seccomp profile, the stateless runner, the snapshots' variables code.
define embed_text
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	$(Q){ echo '/* Generated from $< by the Makefile; do not edit. */'; \
	  echo 'extern const char $(1)[];'; \
	  echo 'const char $(1)[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@.tmp && mv $@.tmp $@
endef

# The sandbox's seccomp profile is a JSON file in the repository, embedded in
# the daemon as a C string.
build/gen/seccomp_profile.c: daemon/policy/sandbox-seccomp.json
	$(call embed_text,seccomp_builtin_profile)

# The stateless tier's runner, embedded the same way (stateless.c).
build/gen/stateless_runner.c: daemon/stateless_runner.py
	$(call embed_text,stateless_runner_source)
# The snapshots' variables code (snapshot_capture.c, snapshot_restore.c),
# embedded the same way.
build/gen/snapshot_vars.c: daemon/snapshot_vars.py
	$(call embed_text,snapshot_vars_source)
# The reviewer's page (GET /review, /review/app.js, /review/app.css), embedded
# the same way: three C strings.
REVIEW_PAGE_FILES := daemon/review_page.html daemon/review_page.js daemon/review_page.css
build/gen/review_page.c: $(REVIEW_PAGE_FILES)
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	$(Q){ echo '/* Generated from $^ by the Makefile; do not edit. */'; \
	  for f in html js css; do \
	    echo "extern const char review_page_$$f[];"; \
	    echo "const char review_page_$$f[] ="; \
	    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' daemon/review_page.$$f; \
	    echo '""'; \
	    echo ';'; \
	  done; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -Ilib -c -o $@ $<

unit: $(BUILD)/unit-tests
	$(BUILD)/unit-tests

# deploy/setup.sh SET: installs what is missing of the set, starts dockerd and
# redis if needed, builds the image. run: what the daemon needs to run and to
# be built (`deploy/setup.sh --list run`); test: that and the test toolchain,
# with the npm test peers (`--list test`). setup is setup-test.
setup-run:
	@deploy/setup.sh run

setup setup-test:
	@deploy/setup.sh test

image:
	@images/python/build.sh

# The service's own images, from Debian packages like the sandbox image
# (images/service/build.sh; each skipped when its recipe is unchanged).
service-images: all
	@images/service/build.sh

# The deploy suite (tests/deploy/): the unit, the example config, the manifests, the service from those images, brought
# up with docker-compose, a session through it, the sidecar pod, and the
# harness's engines (tests/harness/engines.py) driven by the ASan daemon.
# The set-up first, the builds in makes of their own (see run).
test-deploy: setup-test
	@$(MAKE) --no-print-directory service-images
	@$(MAKE) --no-print-directory SANITIZE=1 all
	@TEST_SUITES=deploy tests/run-all.sh

# setup first, then the build in a make of its own: setup may install the
# packages (llhttp's sources) that the build's rules name, and a make that
# looked for them before they existed would not see them.
run: setup-run
	@$(MAKE) --no-print-directory all
	$(BUILD)/ci-daemon

# The builds run with -j (JOBS, default: every core), inside tests/run-all.sh.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# The sandbox image is built by tests/run-all.sh, in the background while it
# compiles the binaries (SETUP_SKIP_IMAGE=1 here); CITEST_LOAD=N adds N busy
# loops for the whole run (docs/hacking.md, "A busy machine").
test:
	@SETUP_SKIP_IMAGE=1 deploy/setup.sh test
	@JOBS=$(JOBS) tests/run-all.sh

bench: setup-test
	@$(MAKE) --no-print-directory all tools
	@tests/bench/run.sh

# 1,000 real idle sessions on this node (tests/bench/scale.py): memory per
# session, the daemon's RSS and fds, exec and create latency at 1,000 live,
# teardown; BENCH_SCALE_TARGET sets the number.
bench-scale: setup-test
	@$(MAKE) --no-print-directory all
	@CITEST_DAEMON=build/ci-daemon /usr/bin/python3 tests/bench/scale.py

# An hour of churn (tests/soak/soak.py): fds, RSS, containers, networks, Redis
# keys, state directories and the heap sampled each minute, all flat at the end.
# make test runs 5 minutes of the same (the soak suite); SOAK_MINUTES sets it.
soak: setup-test
	@$(MAKE) --no-print-directory all
	@/usr/bin/python3 tests/soak/soak.py --minutes $${SOAK_MINUTES:-60} --json build/soak.json

# The notebook fidelity suite (issue 14, tests/fidelity/run.py): real
# notebooks from Debian's doc packages, replayed through ci and a Jupyter
# kernel; the report goes to build/fidelity/report.md.
fidelity: setup-test
	@$(MAKE) --no-print-directory all
	@/usr/bin/python3 tests/fidelity/run.py build/ci-daemon

# Fuzz targets (libFuzzer, clang): one per parser of outside input.
# fuzz-build builds them only (tests/run-all.sh runs them).
# `make fuzz FUZZ_SECONDS=60` runs each; make test runs them briefly.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build/fuzz/%)
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -fno-strict-aliasing -g -O1 -fno-omit-frame-pointer \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined $(PKG_CFLAGS) $(LLHTTP_CFLAGS) \
	-Ilib -Idaemon
FUZZ_LIB_OBJS := $(DAEMON_LIB_SRCS:daemon/%.c=build/fuzz/obj/%.o) \
	$(LIB_SRCS:lib/%.c=build/fuzz/obj/lib/%.o) \
	$(LLHTTP_NAMES:%=build/fuzz/obj/llhttp/%.o) build/fuzz/obj/gen/seccomp_profile.o build/fuzz/obj/gen/stateless_runner.o build/fuzz/obj/gen/snapshot_vars.o \
	build/fuzz/obj/gen/review_page.o \
	build/fuzz/obj/gen/version.o

build/fuzz/obj/llhttp/%.o: $(LLHTTP_SRC_DIR)/%.c Makefile
	@mkdir -p $(dir $@)
	@echo "  CLANG   $< (third-party)"
	$(Q)clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

# Our own code with -Werror as everywhere (not llhttp's): a changed signature
# must not build into a target that then crashes (issue 14's display info
# reached fuzz_frames as a char *, which clang only warned about).
FUZZ_WERROR := -Wall -Wextra -Werror

build/fuzz/obj/%.o: daemon/%.c
	@mkdir -p $(dir $@)
	@echo "  CLANG   $<"
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_WERROR) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/obj/lib/%.o: lib/%.c
	@mkdir -p $(dir $@)
	@echo "  CLANG   $<"
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_WERROR) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/obj/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CLANG   $<"
	$(Q)clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJS)
	@echo "  FUZZ    $@"
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_WERROR) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)

fuzz: $(FUZZ_BINS)
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-build: $(FUZZ_BINS)

FORMAT_SRCS = $(LIB_SRCS) $(DAEMON_SRCS) $(CLI_SRCS) $(UNIT_SRCS) $(FUZZ_SRCS) $(TOOL_SRCS) \
	$(wildcard lib/*.h daemon/*.h cli/*.h tests/unit/*.h)
format:
	clang-format -i $(FORMAT_SRCS)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRCS) && echo "format-check: ok"

# docs/ci-ctl.1 from ci-ctl's own help (cli/gen-man.py); a test checks that
# the committed page is current.
man: $(BUILD)/ci-ctl
	cli/gen-man.py $(BUILD)/ci-ctl docs/ci-ctl.1

# ci-ctl with its man page and bash/zsh completion (PREFIX, DESTDIR).
PREFIX ?= /usr/local
install: $(BUILD)/ci-ctl
	install -D -m 0755 $(BUILD)/ci-ctl $(DESTDIR)$(PREFIX)/bin/ci-ctl
	install -D -m 0644 docs/ci-ctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/ci-ctl.1
	install -D -m 0644 cli/completion/ci-ctl.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/ci-ctl
	install -D -m 0644 cli/completion/_ci-ctl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_ci-ctl

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
