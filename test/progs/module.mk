# test/progs/: programs that tests dump and restore.
TEST_PROGS := $(patsubst test/progs/%.c,$(BUILD)/test-progs/%,$(wildcard test/progs/*.c))

$(BUILD)/test-progs/%: test/progs/%.c test/progs/pattern.h test/progs/progs.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

ALL_TARGETS += $(TEST_PROGS)
