# lib/userfault/: libuserfault (MADV_USERFAULT / remap_anon_pages over
# userfaultfd) -> build/libuserfault/libuserfault.a and .so, its cmocka tests, its
# examples, and bench/userfault/ (make bench-userfault).
UF_DIR      := lib/userfault
UF_SRCS     := $(sort $(wildcard $(UF_DIR)/*.c))
UF_OBJS     := $(patsubst %.c,$(BUILD)/obj/%.o,$(UF_SRCS))
UF_SAN_OBJS := $(patsubst %.c,$(BUILD)/obj/userfault-san/%.o,$(UF_SRCS))
UF_LIB      := $(BUILD)/libuserfault/libuserfault.a
UF_SO       := $(BUILD)/libuserfault/libuserfault.so
UF_LIB_SAN  := $(BUILD)/obj/userfault-san/libuserfault.a
UF_TESTS    := $(patsubst $(UF_DIR)/tests/%.c,$(BUILD)/bin/%,$(sort $(wildcard $(UF_DIR)/tests/test-*.c)))
UF_EXAMPLES := $(patsubst $(UF_DIR)/examples/%.c,$(BUILD)/bin/%,$(sort $(wildcard $(UF_DIR)/examples/*.c)))
UF_BENCH    := $(BUILD)/bin/bench-userfault
UF_LIBS     := -lpthread

# One PIC object set serves both the archive and the shared object.
$(BUILD)/obj/$(UF_DIR)/%.o: $(UF_DIR)/%.c
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -fPIC -MMD -MP -c $< -o $@
$(BUILD)/obj/userfault-san/$(UF_DIR)/%.o: $(UF_DIR)/%.c
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -MMD -MP -c $< -o $@

$(UF_LIB): $(UF_OBJS)
	@mkdir -p $(dir $@)
	@echo "  AR       $@"
	@rm -f $@ && ar rcs $@ $^
$(UF_SO): $(UF_OBJS) $(UF_DIR)/libuserfault.map
	@mkdir -p $(dir $@)
	@echo "  LINK     $@"
	@$(CC) -shared -Wl,--version-script=$(UF_DIR)/libuserfault.map \
		-o $@ $(UF_OBJS) $(UF_LIBS)
$(UF_LIB_SAN): $(UF_SAN_OBJS)
	@rm -f $@ && ar rcs $@ $^

# Unit tests: ASan+UBSan (each test sets handle_sigbus=0 so that its own
# SIGBUS handler, not ASan's, sees the userfaults).
$(UF_TESTS): $(BUILD)/bin/%: $(UF_DIR)/tests/%.c $(UF_DIR)/tests/uf-test.h $(UF_LIB_SAN)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -o $@ $< $(UF_LIB_SAN) -lcmocka $(UF_LIBS)

$(UF_EXAMPLES): $(BUILD)/bin/%: $(UF_DIR)/examples/%.c $(UF_LIB)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< $(UF_LIB) $(UF_LIBS)

$(UF_BENCH): bench/userfault/bench-userfault.c $(UF_LIB)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) -o $@ $< $(UF_LIB) $(UF_LIBS) -lm

.PHONY: bench-userfault userfault
# Per-page cost table, then the 1 GiB demo table (UF_DEMO_MIB to shrink it).
bench-userfault: $(UF_BENCH) $(UF_EXAMPLES)
	@$(UF_BENCH) $(UF_BENCH_ARGS)
	@echo
	@bash bench/userfault/demand-file.sh $(BUILD)/bin/uf-demand-file $(or $(UF_DEMO_MIB),1024) 3

# Just this component, without the CRIU build.
userfault: $(UF_LIB) $(UF_SO) $(UF_TESTS) $(UF_EXAMPLES) $(UF_BENCH)

-include $(UF_OBJS:.o=.d) $(UF_SAN_OBJS:.o=.d)
ALL_TARGETS += $(UF_LIB) $(UF_SO) $(UF_EXAMPLES) $(UF_BENCH)
TEST_BINS   += $(UF_TESTS)
bench: bench-userfault
