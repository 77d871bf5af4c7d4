# bench/runc/: container migration with runc, eager against lazy (stock and ours), same run.
.PHONY: bench-runc
# Overrides: make bench-runc SIZES="256 1024" REPS=5 VARIANTS="eager images-stock images-ours remote-stock"
bench-runc: all
	@bash bench/runc/run.sh $(if $(SIZES),--sizes "$(SIZES)") $(if $(REPS),--reps $(REPS)) \
		$(if $(VARIANTS),--variants "$(VARIANTS)")
bench: bench-runc
