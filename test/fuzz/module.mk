# test/fuzz/: libFuzzer targets (clang, ASan+UBSan) -> build/fuzz/<target>,
# their seed corpora (corpus/<target>/) and crash regressions
# (regressions/<target>/).  `make fuzz` runs them (scripts/module.mk);
# test/cases/60-fuzz.sh replays the inputs and runs each target briefly.
FUZZ_CC      := clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := $(filter-out -O2,$(CFLAGS_COMMON)) -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_OBJ     := $(BUILD)/obj/fuzz
FUZZ_TARGETS := $(patsubst test/fuzz/%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_BINS    := $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
FUZZ_PACK    := $(FUZZ_DIR)/fuzz-pack

# The image library and its generated protobuf-c code, instrumented for coverage.
FUZZ_IMG_OBJS := $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(IMG_SRCS)) \
                 $(patsubst $(IMG_GEN)/%.c,$(FUZZ_OBJ)/pb/%.o,$(IMG_PB_SRCS))

$(FUZZ_OBJ)/pb/%.o: $(IMG_GEN)/%.c
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -I$(IMG_GEN) -c $< -o $@
$(FUZZ_OBJ)/images/%.o: images/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CLANG    $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(IMG_CFLAGS) -MMD -MP -c $< -o $@
$(FUZZ_OBJ)/test/fuzz/%.o: test/fuzz/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CLANG    $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(IMG_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/fuzz_images: $(FUZZ_OBJ)/test/fuzz/fuzz_images.o $(FUZZ_IMG_OBJS)
	@mkdir -p $(dir $@)
	@echo "  LINK     $@"
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -lprotobuf-c

$(FUZZ_PACK): test/fuzz/pack.c test/fuzz/frame.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $<

-include $(FUZZ_IMG_OBJS:.o=.d) $(FUZZ_OBJ)/test/fuzz/fuzz_images.d
ALL_TARGETS += $(FUZZ_BINS) $(FUZZ_PACK)
