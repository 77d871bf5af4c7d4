# zdtm/: CRIU's zdtm suite run against the pinned, patched tree (zdtm/README.md).
#   make zdtm            eager static suite
#   make zdtm-lazy       CRIU's lazy CI set, stock criu lazy-pages
#   make zdtm-lazy-ours  the same set served by build/lazyrestore lazy-pages
#   make zdtm-lazy-plugin the same set, criu restore's plugin (build/lib/lazyrestore.so) starting it
# Bounded: every test is killed after ZDTM_TIMEOUT seconds.
ZDTM_TIMEOUT ?= 120
ZDTM_OPTS    ?= -p 2 --keep-going --timeout $(ZDTM_TIMEOUT)

.PHONY: zdtm zdtm-lazy zdtm-lazy-ours zdtm-lazy-plugin

zdtm: $(CRIU_SRC)/.built
	@$(TOP)/zdtm/run --eager $(ZDTM_OPTS)

zdtm-lazy: $(CRIU_SRC)/.built
	@$(TOP)/zdtm/run --lazy --lazy-ci $(ZDTM_OPTS)

zdtm-lazy-ours: all
	@$(TOP)/zdtm/run --lazy --lazy-daemon ours --lazy-ci $(ZDTM_OPTS)

zdtm-lazy-plugin: all
	@$(TOP)/zdtm/run --lazy --lazy-daemon plugin --lazy-ci $(ZDTM_OPTS)
