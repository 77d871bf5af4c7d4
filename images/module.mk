# images/: validating reader of CRIU image files -> build/obj/images/libimages.a
# protobuf-c code is generated at build time from the pinned tree's images/*.proto.
IMG_PROTOS    := inventory pstree core core-x86 core-arm core-aarch64 core-ppc64 core-s390 core-mips \
                 core-loongarch64 core-riscv64 creds opts rlimit rseq sa siginfo timer mm vma pagemap
IMG_GEN       := $(BUILD)/gen/images
IMG_GEN_STAMP := $(IMG_GEN)/.stamp
IMG_PB_SRCS   := $(addprefix $(IMG_GEN)/,$(addsuffix .pb-c.c,$(IMG_PROTOS))) \
                 $(IMG_GEN)/google/protobuf/descriptor.pb-c.c
IMG_PB_OBJS   := $(patsubst $(IMG_GEN)/%.c,$(BUILD)/obj/images/pb/%.o,$(IMG_PB_SRCS))
IMG_SRCS      := $(sort $(wildcard images/*.c))
IMG_OBJS      := $(patsubst %.c,$(BUILD)/obj/%.o,$(IMG_SRCS))
IMG_LIB       := $(BUILD)/obj/images/libimages.a
IMG_CFLAGS    := -I$(IMG_GEN)
# The same library with ASan+UBSan, for the unit tests and fuzzers.
IMG_LIB_SAN   := $(BUILD)/obj/images-san/libimages.a
IMG_SAN_OBJS  := $(patsubst %.c,$(BUILD)/obj/images-san/%.o,$(IMG_SRCS)) \
                 $(patsubst $(IMG_GEN)/%.c,$(BUILD)/obj/images-san/pb/%.o,$(IMG_PB_SRCS))

$(IMG_GEN_STAMP): $(CRIU_SRC)/.built
	@echo "  PROTOC   images/*.proto -> $(IMG_GEN)"
	@rm -rf $(IMG_GEN) && mkdir -p $(IMG_GEN)
	@protoc-c --proto_path=/usr/include --c_out=$(IMG_GEN) /usr/include/google/protobuf/descriptor.proto
	@cd $(CRIU_SRC)/images && protoc-c --proto_path=. --proto_path=/usr/include --c_out=$(IMG_GEN) \
		$(addsuffix .proto,$(IMG_PROTOS))
	@touch $@

$(IMG_PB_SRCS): $(IMG_GEN_STAMP)

# Generated code is not ours: build it without our warning set.
$(BUILD)/obj/images/pb/%.o: $(IMG_GEN)/%.c
	@mkdir -p $(dir $@)
	@$(CC) -O2 -g -I$(IMG_GEN) -c $< -o $@
$(BUILD)/obj/images-san/pb/%.o: $(IMG_GEN)/%.c
	@mkdir -p $(dir $@)
	@$(CC) -O1 -g $(SAN) -I$(IMG_GEN) -c $< -o $@

$(BUILD)/obj/images/%.o: images/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC       $<"
	@$(CC) $(CFLAGS_COMMON) $(IMG_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/images-san/images/%.o: images/%.c $(IMG_GEN_STAMP)
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS_COMMON) -O1 $(SAN) $(IMG_CFLAGS) -MMD -MP -c $< -o $@

$(IMG_LIB): $(IMG_OBJS) $(IMG_PB_OBJS)
	@echo "  AR       $@"
	@rm -f $@ && ar rcs $@ $^
$(IMG_LIB_SAN): $(IMG_SAN_OBJS)
	@rm -f $@ && ar rcs $@ $^

-include $(IMG_OBJS:.o=.d)
ALL_TARGETS += $(IMG_LIB)
