# lazyrestore — top-level build.  `make` builds everything, `make test` runs
# the test suite (and builds first).  Each component adds itself through a
# module.mk file; see README.md for the map.

SHELL := /bin/bash
.DEFAULT_GOAL := all

TOP        := $(CURDIR)
BUILD      := $(TOP)/build
DL         := $(BUILD)/dl
CRIU_VER   := 4.1.1
CRIU_TAR   := $(DL)/criu_$(CRIU_VER).orig.tar.xz
CRIU_SRC   := $(BUILD)/criu-src
# build/criu/ holds the binaries of the pinned tree: criu, crit.
CRIU_BIN   := $(BUILD)/criu
CRIU       := $(CRIU_BIN)/criu
PATCHES    := $(TOP)/criu-patches
JOBS       ?= $(shell nproc)

CC         ?= gcc
WARN       := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter
CFLAGS_COMMON := -std=gnu11 -g -O2 $(WARN) -D_GNU_SOURCE -I$(TOP) -I$(BUILD)/gen
SAN        := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Components append to these.
ALL_TARGETS :=
TEST_BINS   :=
CLEAN_FILES :=

.PHONY: all deps criu test demo clean distclean lint fuzz zdtm bench help

deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: scripts/deps.sh
	@mkdir -p $(BUILD)
	@bash scripts/deps.sh
	@touch $@

# ---- pinned CRIU -------------------------------------------------------
$(CRIU_TAR): scripts/fetch-criu.sh | $(BUILD)/.deps-ok
	@bash scripts/fetch-criu.sh $(DL)

# The script decides (by content hash of the tarball and the patches) whether
# the tree must be unpacked and rebuilt; .built changes only when it was.
$(CRIU_SRC)/.built: $(CRIU_TAR) FORCE
	@bash scripts/build-criu.sh $(CRIU_TAR) $(PATCHES) $(CRIU_SRC) $(CRIU_BIN) $(JOBS)

.PHONY: FORCE
FORCE:

criu: $(CRIU_SRC)/.built

# ---- components --------------------------------------------------------
include $(sort $(wildcard */module.mk */*/module.mk))

all: $(CRIU_SRC)/.built $(ALL_TARGETS)

# ---- install -----------------------------------------------------------
# make install [DESTDIR=...] [PREFIX=/usr/local]: lazyrestore in BINDIR, the
# plugin where criu looks for plugins (CRIU_PLUGIN_DIR, criu's built-in
# /usr/lib/criu, not under PREFIX), man pages in MANDIR.  make uninstall
# removes exactly what install put (scripts/install.sh keeps the list).
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
INSTALL_VARS = DESTDIR='$(DESTDIR)' BINDIR='$(BINDIR)' MANDIR='$(MANDIR)' DATADIR='$(DATADIR)' \
	CRIU_PLUGIN_DIR='$(CRIU_PLUGIN_DIR)' LR_BIN='$(LR_BIN)' LRP_SO='$(LRP_SO)'
.PHONY: install uninstall
install: $(LR_BIN) $(LRP_SO)
	@$(INSTALL_VARS) bash scripts/install.sh install
uninstall:
	@$(INSTALL_VARS) bash scripts/install.sh uninstall

# First what this host is (so a CI log names the kind of host it ran on), then lint: a tree
# that does not pass `make lint` does not pass its tests.  A missing optional fact never stops
# the suite (check exits 0 for those); a missing required one is reported and the suite runs on.
test: all $(TEST_BINS)
	@echo "== lazyrestore check =="
	@$(LR_BIN) check || echo "lazyrestore check: exit status $$? (a required fact is missing, see above)"
	@echo
	@$(MAKE) --no-print-directory lint
	@bash test/run.sh $(TEST_BINS)

demo: all
	@bash test/demo.sh

clean:
	rm -rf $(BUILD)/obj $(BUILD)/gen $(BUILD)/bin $(BUILD)/lazyrestore $(CLEAN_FILES)

distclean:
	rm -rf $(BUILD)

help:
	@echo "make          build the pinned CRIU and lazyrestore (installs Debian packages)"
	@echo "make test     the test suite (ends with 'N passed, N failed, N skipped'; TESTS=REGEX for some)"
	@echo "make demo     dump the bundled demo program and show its images"
	@echo "make lint     clang-format, cppcheck, shellcheck, gcc+clang -Werror"
	@echo "make fuzz     run every fuzz target (FUZZ_SECONDS each)"
	@echo "make zdtm     CRIU's zdtm suite against this build"
	@echo "make bench    benchmarks against stock CRIU (bench-restore, bench-net, bench-apps,"
	@echo "              bench-runc, bench-userfault one by one; bench/README.md)"
	@echo "make zdtm-lazy-plugin  CRIU's lazy zdtm set with the plugin doing the work"
	@echo "make install / make uninstall  lazyrestore, the CRIU plugin, the man pages"
