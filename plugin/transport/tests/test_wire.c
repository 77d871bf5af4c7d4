// SPDX-License-Identifier: MIT
/* cmocka tests of the page-server header codec (plugin/transport/wire.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/transport/wire.h"

static const struct ps_iov get = {.cmd = PS_IOV_GET, .nr_pages = 16, .vaddr = 0x7f0000001000ULL, .dst_id = 42};

/* 4.1.1: exactly CRIU's struct, field by field at its offsets. */
static void test_24_layout(void **state)
{
	uint8_t buf[PS_HDR_MAX];
	uint32_t u32;
	uint64_t u64;

	(void)state;
	assert_int_equal(ps_hdr_size(PS_WIRE_24), 24);
	assert_int_equal(ps_hdr_encode(PS_WIRE_24, &get, buf), 24);
	memcpy(&u32, buf, 4);
	assert_int_equal(u32, PS_IOV_GET);
	memcpy(&u32, buf + 4, 4);
	assert_int_equal(u32, 16);
	memcpy(&u64, buf + 8, 8);
	assert_true(u64 == 0x7f0000001000ULL);
	memcpy(&u64, buf + 16, 8);
	assert_true(u64 == 42);
}

static void test_32_layout(void **state)
{
	uint8_t buf[PS_HDR_MAX];
	uint32_t u32;
	uint64_t u64;

	(void)state;
	memset(buf, 0xaa, sizeof(buf));
	assert_int_equal(ps_hdr_size(PS_WIRE_32), 32);
	assert_int_equal(ps_hdr_encode(PS_WIRE_32, &get, buf), 32);
	memcpy(&u32, buf, 4);
	assert_int_equal(u32, PS_IOV_GET);
	memcpy(&u32, buf + 4, 4);
	assert_int_equal(u32, 0); /* padding written as zero */
	memcpy(&u64, buf + 8, 8);
	assert_true(u64 == 16);
	memcpy(&u64, buf + 16, 8);
	assert_true(u64 == 0x7f0000001000ULL);
	memcpy(&u64, buf + 24, 8);
	assert_true(u64 == 42);
}

static void roundtrip(enum ps_wire w)
{
	uint8_t buf[PS_HDR_MAX];
	struct ps_iov back;
	char err[128];

	ps_hdr_encode(w, &get, buf);
	assert_int_equal(ps_hdr_decode(w, buf, &back, err, sizeof(err)), 0);
	assert_memory_equal(&back, &get, sizeof(get));
}

static void test_roundtrip(void **state)
{
	(void)state;
	roundtrip(PS_WIRE_24);
	roundtrip(PS_WIRE_32);
}

static void test_32_refusals(void **state)
{
	uint8_t buf[PS_HDR_MAX];
	struct ps_iov back = {0};
	uint64_t big = 1ULL << 32;
	char err[128];

	(void)state;
	ps_hdr_encode(PS_WIRE_32, &get, buf);
	buf[5] = 1;
	assert_int_equal(ps_hdr_decode(PS_WIRE_32, buf, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "padding"));
	ps_hdr_encode(PS_WIRE_32, &get, buf);
	memcpy(buf + 8, &big, 8);
	assert_int_equal(ps_hdr_decode(PS_WIRE_32, buf, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "4294967296 pages"));
	assert_int_equal(back.cmd, 0); /* nothing written on refusal */
}

static void test_wire_parse(void **state)
{
	enum ps_wire w = PS_WIRE_24;

	(void)state;
	assert_int_equal(ps_wire_parse("4.2", &w), 0);
	assert_int_equal(w, PS_WIRE_32);
	assert_int_equal(ps_wire_parse("24", &w), 0);
	assert_int_equal(w, PS_WIRE_24);
	assert_int_equal(ps_wire_parse("4.3", &w), -1);
	assert_int_equal(ps_wire_parse("", &w), -1);
}

static void test_check_answer(void **state)
{
	struct ps_iov a = {.cmd = PS_ANSWER_CMD, .nr_pages = 16, .vaddr = get.vaddr, .dst_id = get.dst_id};
	char err[128];

	(void)state;
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), 0);
	a.nr_pages = 1; /* short answers are the protocol's */
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), 0);
	a.nr_pages = 17;
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "17 pages (asked 16)"));
	a.nr_pages = 0;
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), -1);
	a.nr_pages = 4;
	a.vaddr += 4096;
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "answer at 0x7f0000002000 (asked 0x7f0000001000)"));
	a.vaddr = get.vaddr;
	a.dst_id = 43;
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pid 43"));
	a.dst_id = get.dst_id;
	a.cmd = PS_IOV_ADD_F; /* no PE_PRESENT */
	assert_int_equal(ps_check_answer(&a, &get, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "answer command 0x6"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_24_layout),	cmocka_unit_test(test_32_layout),  cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_32_refusals), cmocka_unit_test(test_wire_parse), cmocka_unit_test(test_check_answer),
	};

	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
