# bench/net/: remote lazy restore, our lazy-pages --page-server against stock, same run.
.PHONY: bench-net
# Overrides: make bench-net SIZES_NET="256 1024" REPS_NET=3
bench-net: all
	@bash bench/net/run.sh $(if $(SIZES_NET),--sizes "$(SIZES_NET)") $(if $(REPS_NET),--reps $(REPS_NET))
bench: bench-net
