# scripts/: `make lint` and `make fuzz` (both declared .PHONY by the top Makefile).
# lint compiles every C file with the build's own flags, so it needs the generated
# protobuf-c headers.  LINT_FILE_FLAGS mirrors the extra flags a module gives one
# file (FILE=FLAG,FLAG): test/unit/module.mk builds test_images.c, whose helpers
# take their format strings from tables, with -Wno-format-nonliteral.
LINT_CFLAGS     := $(CFLAGS_COMMON) $(IMG_CFLAGS) -DTOP_DIR="$(TOP)"
LINT_FILE_FLAGS := test/unit/test_images.c=-Wno-format-nonliteral
FUZZ_SECONDS    ?= 300

lint: $(IMG_GEN_STAMP)
	@LINT_CFLAGS='$(LINT_CFLAGS)' LINT_FILE_FLAGS='$(LINT_FILE_FLAGS)' bash scripts/lint.sh

fuzz: $(FUZZ_BINS)
	@bash test/fuzz/run-fuzz.sh $(FUZZ_SECONDS)
