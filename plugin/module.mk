# plugin/: the fault engine, transports and front ends -> build/lazyrestore
LR_BIN   := $(BUILD)/lazyrestore
LR_SRCS  := $(filter-out plugin/tests/% plugin/criu/%,$(sort $(wildcard plugin/*/*.c)))
LR_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LR_SRCS))
LR_LIBS  := $(IMG_LIB) -lprotobuf-c -lpthread

$(BUILD)/obj/plugin/%.o: plugin/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -MMD -MP -c $< -o $@

$(LR_BIN): $(LR_OBJS) $(IMG_LIB)
	@echo "  LINK     $@"
	@$(CC) -o $@ $(LR_OBJS) $(LR_LIBS)

-include $(LR_OBJS:.o=.d)
ALL_TARGETS += $(LR_BIN)

# Unit tests (cmocka, ASan+UBSan): the engine's pure parts.
LR_UNIT := $(BUILD)/unit/test_ranges
$(LR_UNIT): plugin/tests/test_ranges.c plugin/engine/ranges.c plugin/engine/stats.c plugin/log/log.c $(IMG_LIB_SAN)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(filter %.c,$^) $(IMG_LIB_SAN) -lprotobuf-c -lcmocka
LR_GATE_UNIT := $(BUILD)/unit/test_gate
$(LR_GATE_UNIT): plugin/tests/test_gate.c plugin/engine/gate.c plugin/engine/gate.h plugin/engine/stats.c plugin/log/log.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(filter %.c,$^) -lpthread -lcmocka
TEST_BINS += $(LR_UNIT) $(LR_GATE_UNIT)
LR_CHECK_UNIT := $(BUILD)/unit/test_check
$(LR_CHECK_UNIT): plugin/cli/tests/test_check.c plugin/cli/check-util.c plugin/cli/check-util.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(filter %.c,$^) -lcmocka
TEST_BINS += $(LR_CHECK_UNIT)
# Which processes are the restore's (forks a stand-in for criu; CLONE_NEWPID needs root).
LR_TREE_UNIT := $(BUILD)/unit/test_tree
$(LR_TREE_UNIT): plugin/tests/test_tree.c plugin/engine/tree.c plugin/engine/tree.h plugin/log/log.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(filter %.c,$^) -lcmocka
TEST_BINS += $(LR_TREE_UNIT)
# The engine in-process (needs a userfaultfd: root here).
LR_ENGINE_UNIT := $(BUILD)/unit/test_engine
LR_ENGINE_UNIT_SRCS := plugin/tests/test_engine.c $(wildcard plugin/engine/*.c) plugin/source/file.c \
	plugin/supervisor/journal.c plugin/log/log.c
$(LR_ENGINE_UNIT): $(LR_ENGINE_UNIT_SRCS) $(wildcard plugin/engine/*.h plugin/source/*.h) $(IMG_LIB_SAN)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(LR_ENGINE_UNIT_SRCS) $(IMG_LIB_SAN) -lprotobuf-c -lpthread -lcmocka
TEST_BINS += $(LR_ENGINE_UNIT)
