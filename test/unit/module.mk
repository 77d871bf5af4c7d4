# test/unit/: cmocka unit tests, built with ASan+UBSan.
UNIT_BIN := $(BUILD)/unit

$(UNIT_BIN)/test_images: test/unit/test_images.c $(IMG_LIB_SAN) test/progs/pattern.h
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) $(IMG_CFLAGS) -Wno-format-nonliteral -DTOP_DIR='"$(TOP)"' -o $@ $< $(IMG_LIB_SAN) -lprotobuf-c -lcmocka

TEST_BINS += $(UNIT_BIN)/test_images

$(UNIT_BIN)/test_ws: test/unit/test_ws.c $(IMG_LIB_SAN)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) $(IMG_CFLAGS) -DTOP_DIR='"$(TOP)"' -o $@ $< $(IMG_LIB_SAN) -lprotobuf-c -lcmocka

TEST_BINS += $(UNIT_BIN)/test_ws
