# plugin/criu/: the CRIU plugin -> build/lib/lazyrestore.so (criu --libdir
# build/lib, or installed into criu's plugin dir by `make install`).  Built
# against the pinned CRIU tree's criu-plugin.h; LR_INSTALL_BIN is where it
# looks for lazyrestore after $LAZYRESTORE_BIN and ../lazyrestore beside itself.
PREFIX          ?= /usr/local
CRIU_PLUGIN_DIR ?= /usr/lib/criu
LRP_SO    := $(BUILD)/lib/lazyrestore.so
LRP_SRCS  := $(sort $(wildcard plugin/criu/*.c))
LRP_OBJS  := $(patsubst %.c,$(BUILD)/obj/criu-plugin/%.o,$(LRP_SRCS))
LRP_STAMP := $(BUILD)/obj/criu-plugin/prefix

# Rewritten only when PREFIX changes, so the plugin is rebuilt only then.
$(LRP_STAMP): FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = "$(PREFIX)" ] || echo "$(PREFIX)" >$@

$(BUILD)/obj/criu-plugin/plugin/criu/%.o: plugin/criu/%.c $(LRP_STAMP) | $(CRIU_SRC)/.built
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -fPIC -DLR_INSTALL_BIN='"$(PREFIX)/bin/lazyrestore"' -MMD -MP -c $< -o $@

# Only CR_PLUGIN_DESC is exported (criu dlsym()s it); criu's own symbols
# (print_on_level, criu_get_image_dir) resolve against the criu binary.
$(LRP_SO): $(LRP_OBJS) plugin/criu/lazyrestore.map
	@mkdir -p $(dir $@)
	@echo "  LINK     $@"
	@$(CC) -shared -Wl,--version-script=plugin/criu/lazyrestore.map -o $@ $(LRP_OBJS)

-include $(LRP_OBJS:.o=.d)
ALL_TARGETS += $(LRP_SO)
