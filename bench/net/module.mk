# bench/net/: remote lazy restore, our lazy-pages --page-server against stock, same run,
# over loopback and over links of set delay and rate (delayline: this kernel has no netem).
BENCH_DELAYLINE := $(BUILD)/bench/delayline
BENCH_LINKPROBE := $(BUILD)/bench/linkprobe

$(BENCH_DELAYLINE): bench/net/delayline.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

$(BENCH_LINKPROBE): bench/net/linkprobe.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< -lpthread

ALL_TARGETS += $(BENCH_DELAYLINE) $(BENCH_LINKPROBE)

.PHONY: bench-net
# Overrides: make bench-net ROWS_NET="256@lo 256@10/1g/fifo" | FULL_NET=1 | SIZES_NET="256 1024" (loopback)
#   | REPS_NET=3 | QUEUE_NET=fifo
bench-net: all
	@bash bench/net/run.sh $(if $(ROWS_NET),--rows "$(ROWS_NET)") $(if $(FULL_NET),--full) \
		$(if $(SIZES_NET),--sizes "$(SIZES_NET)") $(if $(REPS_NET),--reps $(REPS_NET)) \
		$(if $(QUEUE_NET),--queue $(QUEUE_NET))
bench: bench-net
