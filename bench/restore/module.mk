# bench/restore/: lazy restore, ours against stock `criu lazy-pages`, same run.
BENCH_TOUCH := $(BUILD)/bench/touch

$(BENCH_TOUCH): bench/restore/touch.c test/progs/pattern.h test/progs/progs.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $<

BENCH_COPYFLOOR := $(BUILD)/bench/copyfloor

$(BENCH_COPYFLOOR): bench/restore/copyfloor.c lib/uffd-compat.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

ALL_TARGETS += $(BENCH_TOUCH) $(BENCH_COPYFLOOR)

.PHONY: bench-restore
# SIZES (MiB), REPS and PROGRAMS may be overridden: make bench-restore SIZES="256 1024" REPS=5 PROGRAMS=idle
bench-restore: all
	@bash bench/restore/run.sh $(if $(SIZES),--sizes "$(SIZES)") $(if $(REPS),--reps $(REPS)) \
		$(if $(PROGRAMS),--programs "$(PROGRAMS)")
bench: bench-restore
