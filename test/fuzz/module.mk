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

# The hand-off reader and the engine's lazy ranges (built from what images/ accepted),
# instrumented the same way.
FUZZ_HANDOFF_OBJS := $(addprefix $(FUZZ_OBJ)/plugin/,handoff/handoff.o engine/tree.o log/log.o)
$(FUZZ_OBJ)/plugin/%.o: plugin/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CLANG    $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

# The page server's request checks, over the image library that reads what it serves.
FUZZ_PS_OBJS := $(FUZZ_OBJ)/plugin/pageserver/protocol.o

# FUZZ_LINK target, objects of the code under test, libraries
define FUZZ_LINK
$(FUZZ_DIR)/$(1): $(FUZZ_OBJ)/test/fuzz/$(1).o $(2)
	@mkdir -p $$(dir $$@)
	@echo "  LINK     $$@"
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $$@ $$^ $(3)
endef
$(eval $(call FUZZ_LINK,fuzz_images,$(FUZZ_IMG_OBJS) $(FUZZ_OBJ)/plugin/engine/ranges.o,-lprotobuf-c))
$(eval $(call FUZZ_LINK,fuzz_handoff,$(FUZZ_HANDOFF_OBJS),))
$(eval $(call FUZZ_LINK,fuzz_pageserver,$(FUZZ_PS_OBJS) $(FUZZ_IMG_OBJS),-lprotobuf-c))
# The page-server client's answer parser and the header codec.
FUZZ_PSC_OBJS := $(addprefix $(FUZZ_OBJ)/plugin/transport/,answer.o wire.o)
$(eval $(call FUZZ_LINK,fuzz_psclient,$(FUZZ_PSC_OBJS),))
# The working-set file reader (images/ws.c, in the image library).
$(eval $(call FUZZ_LINK,fuzz_ws,$(FUZZ_IMG_OBJS),-lprotobuf-c))

$(FUZZ_PACK): test/fuzz/pack.c test/fuzz/frame.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $<

-include $(FUZZ_IMG_OBJS:.o=.d) $(FUZZ_HANDOFF_OBJS:.o=.d) $(FUZZ_PS_OBJS:.o=.d) $(FUZZ_PSC_OBJS:.o=.d) \
         $(addprefix $(FUZZ_OBJ)/test/fuzz/,$(addsuffix .d,$(FUZZ_TARGETS)))
ALL_TARGETS += $(FUZZ_BINS) $(FUZZ_PACK)
