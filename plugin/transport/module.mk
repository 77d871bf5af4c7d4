# plugin/transport/: CRIU's page-server header codec, our page-server client
# and TLS.  Its .c files are linked into build/lazyrestore by plugin/module.mk.
LR_LIBS += -lgnutls

# Unit tests (cmocka, ASan+UBSan).
TR_UNIT := $(BUILD)/unit/test_wire
$(TR_UNIT): plugin/transport/tests/test_wire.c plugin/transport/wire.c plugin/transport/wire.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $(filter %.c,$^) -lcmocka
TEST_BINS += $(TR_UNIT)
