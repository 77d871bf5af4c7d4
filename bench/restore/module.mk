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

# The floor under a fault's latency: one-page round trips with nothing else running.
BENCH_ROUNDTRIP := $(BUILD)/bench/roundtrip

$(BENCH_ROUNDTRIP): bench/restore/roundtrip.c lib/uffd-compat.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

ALL_TARGETS += $(BENCH_TOUCH) $(BENCH_COPYFLOOR) $(BENCH_ROUNDTRIP)

.PHONY: bench-restore
# Overrides: make bench-restore QUICK=1 | FULL_FLOOR=1 | ROWS="256:1000:busy,idle 512:20000:busy" | REPS=5
#   | FLOOR_REPS=5, or the old SIZES="256 1024" TOUCHES=1000 PROGRAMS=idle (one row per size)
bench-restore: all
	@bash bench/restore/run.sh $(if $(QUICK),--quick) $(if $(FULL_FLOOR),--full-floor) \
		$(if $(ROWS),--rows "$(ROWS)") $(if $(SIZES),--sizes "$(SIZES)") $(if $(TOUCHES),--touches $(TOUCHES)) \
		$(if $(REPS),--reps $(REPS)) $(if $(FLOOR_REPS),--floor-reps $(FLOOR_REPS)) \
		$(if $(PROGRAMS),--programs "$(PROGRAMS)")
bench: bench-restore
