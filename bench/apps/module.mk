# bench/apps/: redis, memcached and a python dict restored eager / stock lazy / ours / ours + working set.
.PHONY: bench-apps
# Overrides: make bench-apps APPS="redis pydict" KEYS_APPS=200000 REPS_APPS=1 SECONDS_APPS=1
bench-apps: all
	@bash bench/apps/run.sh $(if $(APPS),--apps "$(APPS)") $(if $(KEYS_APPS),--keys $(KEYS_APPS)) \
		$(if $(REPS_APPS),--reps $(REPS_APPS)) $(if $(SECONDS_APPS),--seconds $(SECONDS_APPS))
bench: bench-apps
