# plugin/: the fault engine, transports and front ends -> build/lazyrestore
LR_BIN   := $(BUILD)/lazyrestore
LR_SRCS  := $(sort $(wildcard plugin/*/*.c))
LR_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LR_SRCS))
LR_LIBS  := $(IMG_LIB) -lprotobuf-c -lpthread

$(BUILD)/obj/plugin/%.o: plugin/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -MMD -MP -c $< -o $@

$(LR_BIN): $(LR_OBJS) $(IMG_LIB)
	@echo "  LINK     $@"
	@$(CC) -o $@ $(LR_OBJS) $(LR_LIBS)

-include $(LR_OBJS:.o=.d)
ALL_TARGETS += $(LR_BIN)
