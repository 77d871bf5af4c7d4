# bench/noise/: how quiet the machine is (a busy thread per CPU, its longest gaps, steal); every bench prints it.
BENCH_NOISE := $(BUILD)/bench/noise

$(BENCH_NOISE): bench/noise/noise.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

ALL_TARGETS += $(BENCH_NOISE)
