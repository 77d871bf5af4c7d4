// SPDX-License-Identifier: MIT
/*
 * fuzz_pageserver: the page server's request path (plugin/pageserver/
 * protocol.c: ps_check_request, then ps_answer_get for a GET) reading a
 * stream of requests from a hostile peer, against a dump made from the
 * input's first bytes.  The dump's mm and pagemap files go through
 * img_read_mm() as in server.c's load_images(), so only what images/ accepts
 * is served.  The pages "file" is a buffer whose every page starts with its
 * own (pid, dump-time address); every answer must carry the stamps it claims,
 * and a refusal must be for a page the dump does not hold by a naive scan of
 * what this harness wrote (not of what images/ read back).
 *
 * Input (host order):
 *   u8 tasks: 1 + tasks % 4 tasks, each
 *     u32 pid    & INT32_MAX; 0 or a repeat drops the task (pstree allows neither)
 *     u8  pmes   % 17 pagemap entries
 *     u8  tail   bits 0-6: the pages file is tail * 512 bytes longer than the pagemap needs;
 *                bit 7: it is mapped cut to cut % its size (see map_size())
 *     u32 cut
 *     u64 base   the first entry's address before its gap (rounded down to a page)
 *     pmes x {u16 gap: pages after the previous entry;
 *             u16 pages: & 0x7ff if bit 15, else & 0x3f;
 *             u8 flags: bit 7 ? flags & 0xf : {PRESENT, LAZY|PRESENT, LAZY, PARENT}[flags & 3]}
 *   then 24-byte struct ps_iov requests to the end.  protocol.c keeps no state,
 *   so the stream goes on past a refusal or a CLOSE (where server.c would stop).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "images/image.h"
#include "inventory.pb-c.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"
#include "plugin/pageserver/protocol.h"
#include "test/fuzz/fuzz.h"

#define MAX_TASKS   4
#define MAX_PMES    16
#define TASK_PAGES  4096 /* present pages per task; a task with more is dropped */
#define TAIL_UNIT   512
#define REGION_SIZE ((TASK_PAGES + 16) * IMG_PAGE_SIZE) /* pages file + the largest tail */
#define STAMP_SIZE  16
#define ERR_LEN	    200 /* as server.c's */

/* One pagemap entry as this harness wrote it; off counted here, not by images/. */
struct entry {
	uint64_t vaddr, end, off;
	uint32_t nr_pages, flags;
};

struct task {
	uint32_t pid;
	size_t nr;
	struct entry e[MAX_PMES];
	uint64_t pages_bytes, file_size;
	bool cut;
	uint32_t cut_at;
	bool read; /* mm holds what img_read_mm() returned */
	struct img_mm mm;
	uint8_t *pages; /* this task's pages file, stamped */
};

static char scratch[256];
static struct img_dir *dir;
static uint8_t *regions; /* MAX_TASKS * REGION_SIZE, mapped once */
static struct task tasks[MAX_TASKS];
static struct ps_image imgs[MAX_TASKS];
static size_t nr_tasks;
static bool verbose; /* FUZZ_VERBOSE=1: say what was refused and why */

/* ---- the scratch dump directory --------------------------------------- */

static void write_file(const char *name, const uint8_t *buf, size_t len, uint64_t size)
{
	char path[320];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fatal("create %s: %s", path, strerror(errno));
	if (len && write(fd, buf, len) != (ssize_t)len)
		fatal("write %s: %s", path, strerror(errno));
	/* a pages file: its size is all img_read_mm looks at, so make it sparse */
	if (size && ftruncate(fd, (off_t)size) < 0)
		fatal("truncate %s: %s", path, strerror(errno));
	if (close(fd) < 0)
		fatal("close %s: %s", path, strerror(errno));
}

/* PREFIX-ID.img, the way CRIU names per-task and per-pages-file images */
static const char *img_name(char *buf, size_t len, const char *prefix, uint32_t id)
{
	snprintf(buf, len, "%s-%u.img", prefix, id);
	return buf;
}

static void remove_file(const char *name)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	if (unlink(path) < 0 && errno != ENOENT)
		fatal("unlink %s: %s", path, strerror(errno));
}

/* An image file: magics, then each message with its u32 length. */
struct image {
	uint8_t buf[4096];
	size_t len;
};

static void put_u32(struct image *im, uint32_t v)
{
	memcpy(im->buf + im->len, &v, sizeof(v));
	im->len += sizeof(v);
}

static void put_msg(struct image *im, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	if (n > sizeof(im->buf) - im->len - 4)
		fatal("a %zu-byte %s record does not fit", n, m->descriptor->name);
	put_u32(im, (uint32_t)n);
	im->len += protobuf_c_message_pack(m, im->buf + im->len);
}

static void write_image(const char *prefix, uint32_t id, const struct image *im)
{
	char name[64];

	write_file(img_name(name, sizeof(name), prefix, id), im->buf, im->len, 0);
}

static void remove_scratch(void)
{
	remove_file("inventory.img");
	img_dir_close(dir);
	if (rmdir(scratch) < 0)
		fprintf(stderr, "fuzz_pageserver: rmdir %s: %s\n", scratch, strerror(errno));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	InventoryEntry ie = INVENTORY_ENTRY__INIT;
	const char *base = getenv("FUZZ_SCRATCH");
	struct image im = {.len = 0};
	struct img_err err;

	if (!base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(scratch, sizeof(scratch), "%s/lazyrestore-fuzz.XXXXXX", base);
	if (!mkdtemp(scratch))
		fatal("mkdtemp %s: %s", scratch, strerror(errno));
	ie.img_version = 2;
	ie.has_fdinfo_per_id = ie.fdinfo_per_id = true;
	put_u32(&im, IMG_INVENTORY_MAGIC);
	put_msg(&im, &ie.base);
	write_file("inventory.img", im.buf, im.len, 0);
	if (img_dir_open(scratch, &dir, &err))
		fatal("%s", err.msg);
	atexit(remove_scratch);
	/* Page-sized stamps only, touched as used: reserve, do not commit. */
	regions = mmap(NULL, MAX_TASKS * REGION_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (regions == MAP_FAILED)
		fatal("mmap %lu bytes: %s", MAX_TASKS * REGION_SIZE, strerror(errno));
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	return 0;
}

/* ---- the dump from the input ------------------------------------------ */

static bool listed(uint32_t pid)
{
	for (size_t i = 0; i < nr_tasks; i++)
		if (tasks[i].pid == pid)
			return true;
	return false;
}

static bool read_entries(struct input *in, struct task *t, uint8_t nr)
{
	static const uint32_t common[] = {IMG_PE_PRESENT, IMG_PE_LAZY | IMG_PE_PRESENT, IMG_PE_LAZY, IMG_PE_PARENT};
	uint64_t base, end;

	if (!take(in, &base, sizeof(base)))
		return false;
	end = base & ~(IMG_PAGE_SIZE - 1);
	for (t->nr = 0; t->nr < nr % (MAX_PMES + 1); t->nr++) {
		struct entry *e = &t->e[t->nr];
		uint16_t gap, pages;
		uint8_t flags;

		if (!take(in, &gap, 2) || !take(in, &pages, 2) || !take(in, &flags, 1))
			return false;
		/* wrapping is unsigned, and the reader's to reject */
		e->vaddr = end + ((uint64_t)gap << IMG_PAGE_SHIFT);
		e->nr_pages = pages & 0x8000 ? pages & 0x7ff : pages & 0x3f;
		e->end = end = e->vaddr + ((uint64_t)e->nr_pages << IMG_PAGE_SHIFT);
		e->flags = flags & 0x80 ? flags & 0xf : common[flags & 3];
		e->off = t->pages_bytes;
		if (e->flags & IMG_PE_PRESENT)
			t->pages_bytes += (uint64_t)e->nr_pages << IMG_PAGE_SHIFT;
	}
	return true;
}

/* The dump's tasks (into tasks[]); false if the input ends inside them. */
static bool read_dump(struct input *in)
{
	uint8_t n;

	if (!take(in, &n, 1))
		return false;
	for (int i = 0; i < 1 + n % MAX_TASKS; i++) {
		struct task *t = &tasks[nr_tasks];
		uint8_t nr, tail;

		memset(t, 0, sizeof(*t));
		if (!take(in, &t->pid, 4) || !take(in, &nr, 1) || !take(in, &tail, 1) || !take(in, &t->cut_at, 4) ||
		    !read_entries(in, t, nr))
			return false;
		t->pid &= INT32_MAX;
		t->file_size = t->pages_bytes + (uint64_t)(tail & 0x7f) * TAIL_UNIT;
		t->cut = tail & 0x80;
		t->pages = regions + nr_tasks * REGION_SIZE;
		if (t->pid && !listed(t->pid) && t->pages_bytes <= (uint64_t)TASK_PAGES << IMG_PAGE_SHIFT)
			nr_tasks++;
	}
	return nr_tasks > 0;
}

/* mm-<pid>.img: one VMA over all entries; pagemap-<pid>.img; pages-<n>.img of the right size. */
static void write_task(const struct task *t, uint32_t pages_id)
{
	VmaEntry ve = VMA_ENTRY__INIT, *vp = &ve;
	PagemapHead ph = PAGEMAP_HEAD__INIT;
	MmEntry me = MM_ENTRY__INIT;
	struct image im = {.len = 0};
	char name[64];

	put_u32(&im, IMG_COMMON_MAGIC);
	put_u32(&im, IMG_MM_MAGIC);
	if (t->nr) {
		ve.start = t->e[0].vaddr;
		ve.end = t->e[t->nr - 1].end;
		ve.prot = PROT_READ | PROT_WRITE;
		ve.flags = MAP_PRIVATE | MAP_ANONYMOUS;
		ve.status = IMG_VMA_AREA_REGULAR | IMG_VMA_ANON_PRIVATE;
		ve.fd = -1;
		me.n_vmas = 1;
		me.vmas = &vp;
	}
	put_msg(&im, &me.base);
	write_image("mm", t->pid, &im);

	im.len = 0;
	put_u32(&im, IMG_COMMON_MAGIC);
	put_u32(&im, IMG_PAGEMAP_MAGIC);
	ph.pages_id = pages_id;
	put_msg(&im, &ph.base);
	for (size_t i = 0; i < t->nr; i++) {
		PagemapEntry pe = PAGEMAP_ENTRY__INIT;

		pe.vaddr = t->e[i].vaddr;
		pe.nr_pages = t->e[i].nr_pages;
		pe.has_flags = true;
		pe.flags = t->e[i].flags;
		put_msg(&im, &pe.base);
	}
	write_image("pagemap", t->pid, &im);
	write_file(img_name(name, sizeof(name), "pages", pages_id), NULL, 0, t->file_size);
}

/* What img_read_mm accepted is what was written. */
static void check_read_back(const struct task *t)
{
	if (t->mm.nr_pmes != t->nr || t->mm.pages_bytes != t->pages_bytes)
		violation("task %u: img_read_mm read %zu pagemap entries, %llu bytes; %zu, %llu were written", t->pid,
			  t->mm.nr_pmes, (unsigned long long)t->mm.pages_bytes, t->nr,
			  (unsigned long long)t->pages_bytes);
	for (size_t i = 0; i < t->nr; i++) {
		const struct img_pme *p = &t->mm.pmes[i];

		if (p->vaddr != t->e[i].vaddr || p->nr_pages != t->e[i].nr_pages || p->flags != t->e[i].flags)
			violation("task %u: img_read_mm changed pagemap entry %zu", t->pid, i);
	}
}

static void stamp(uint8_t *page, uint64_t pid, uint64_t vaddr)
{
	memcpy(page, &pid, 8);
	memcpy(page + 8, &vaddr, 8);
}

/* Each present page carries its (pid, vaddr); the file's tail beyond the pagemap carries pid 0. */
static void stamp_pages(const struct task *t)
{
	for (size_t i = 0; i < t->nr; i++) {
		const struct entry *e = &t->e[i];

		if (!(e->flags & IMG_PE_PRESENT))
			continue;
		for (uint32_t k = 0; k < e->nr_pages; k++)
			stamp(t->pages + e->off + ((uint64_t)k << IMG_PAGE_SHIFT), t->pid,
			      e->vaddr + ((uint64_t)k << IMG_PAGE_SHIFT));
	}
	for (uint64_t off = t->pages_bytes; off + STAMP_SIZE <= t->file_size; off += IMG_PAGE_SIZE)
		stamp(t->pages + off, 0, off);
}

/*
 * What server.c would map: nothing if the pagemap uses no bytes, else the
 * file's size at img_pages_map() time.  That is after img_read_mm() checked
 * it, so a file cut short in between is mapped shorter than the pagemap says.
 */
static uint64_t map_size(const struct task *t)
{
	if (!t->pages_bytes)
		return 0;
	if (t->cut)
		return t->cut_at % t->file_size;
	return t->file_size;
}

static bool load_dump(void)
{
	struct img_err err;

	for (size_t i = 0; i < nr_tasks; i++)
		write_task(&tasks[i], i + 1);
	for (size_t i = 0; i < nr_tasks; i++) {
		struct task *t = &tasks[i];
		uint64_t size = map_size(t);

		if (img_read_mm(dir, t->pid, &t->mm, &err)) {
			if (verbose)
				fprintf(stderr, "fuzz_pageserver: dump not served: %s\n", err.msg);
			return false;
		}
		t->read = true;
		check_read_back(t);
		stamp_pages(t);
		/* img_pages_map() maps nothing for an empty file */
		imgs[i] = (struct ps_image){t->pid, &t->mm, size ? t->pages : NULL, size, -1};
	}
	return true;
}

static void unload_dump(void)
{
	char name[64];

	for (size_t i = 0; i < nr_tasks; i++) {
		if (tasks[i].read)
			img_mm_free(&tasks[i].mm);
		remove_file(img_name(name, sizeof(name), "mm", tasks[i].pid));
		remove_file(img_name(name, sizeof(name), "pagemap", tasks[i].pid));
		remove_file(img_name(name, sizeof(name), "pages", i + 1));
	}
	nr_tasks = 0;
}

/* ---- the requests ----------------------------------------------------- */

static void check_err(const char *fn, const struct ps_iov *req, const char *err)
{
	if (!memchr(err, 0, ERR_LEN) || !err[0])
		violation("%s refused cmd %#x pid %llu %#llx with an %s error", fn, req->cmd,
			  (unsigned long long)req->dst_id, (unsigned long long)req->vaddr,
			  memchr(err, 0, ERR_LEN) ? "empty" : "unterminated");
	if (verbose)
		fprintf(stderr, "fuzz_pageserver: %s: %s\n", fn, err);
}

/* What ps_check_request must say, from protocol.h's rules. */
static int want_kind(const struct ps_iov *r)
{
	if (r->cmd == PS_IOV_CLOSE)
		return PS_REQ_CLOSE;
	if (r->cmd == PS_IOV_FORCE_CLOSE)
		return PS_REQ_FORCE_CLOSE;
	if (r->cmd == PS_IOV_GET && r->nr_pages >= 1 && r->nr_pages <= PS_MAX_GET_PAGES &&
	    !(r->vaddr % IMG_PAGE_SIZE) && r->dst_id >= 1 && r->dst_id <= INT32_MAX)
		return PS_REQ_GET;
	return -1;
}

/* Naive scans of what was written: the task, and the entry holding vaddr. */
static const struct task *task_of(uint64_t pid, size_t *ix)
{
	for (size_t i = 0; i < nr_tasks; i++)
		if (tasks[i].pid == pid) {
			*ix = i;
			return &tasks[i];
		}
	return NULL;
}

static const struct entry *entry_of(const struct task *t, uint64_t vaddr)
{
	for (size_t i = 0; i < t->nr; i++)
		if (vaddr >= t->e[i].vaddr && vaddr < t->e[i].end)
			return &t->e[i];
	return NULL;
}

static void check_answer(const struct ps_iov *req, const struct task *t, const struct ps_image *im,
			 const struct entry *e, const struct ps_iov *reply, const uint8_t *data)
{
	uint64_t max = req->nr_pages < PS_MAX_REPLY_PAGES ? req->nr_pages : PS_MAX_REPLY_PAGES;
	uint64_t nr = reply->nr_pages, len = nr << IMG_PAGE_SHIFT, want_off = e->off + (req->vaddr - e->vaddr);
	uintptr_t base = (uintptr_t)im->pages, at = (uintptr_t)data;

	if (reply->vaddr != req->vaddr || reply->dst_id != req->dst_id)
		violation("GET pid %llu %#llx answered for pid %llu %#llx", (unsigned long long)req->dst_id,
			  (unsigned long long)req->vaddr, (unsigned long long)reply->dst_id,
			  (unsigned long long)reply->vaddr);
	if (reply->cmd != (PS_IOV_ADD_F | PS_PE_PRESENT << PS_FLAGS_SHIFT))
		violation("GET pid %u %#llx answered with cmd %#x", t->pid, (unsigned long long)req->vaddr, reply->cmd);
	if (nr < 1 || nr > max)
		violation("GET pid %u %#llx of %u pages answered with %llu (want 1..%llu)", t->pid,
			  (unsigned long long)req->vaddr, req->nr_pages, (unsigned long long)nr,
			  (unsigned long long)max);
	if (len > e->end - req->vaddr)
		violation("GET pid %u %#llx: %llu pages run past its pagemap entry %#llx-%#llx", t->pid,
			  (unsigned long long)req->vaddr, (unsigned long long)nr, (unsigned long long)e->vaddr,
			  (unsigned long long)e->end);
	if (!base || at < base || at - base > im->pages_size || len > im->pages_size - (at - base))
		violation("GET pid %u %#llx: %llu pages at %#lx, outside the %llu-byte pages mapping at %#lx", t->pid,
			  (unsigned long long)req->vaddr, (unsigned long long)nr, (unsigned long)at,
			  (unsigned long long)im->pages_size, (unsigned long)base);
	if (at - base != want_off)
		violation("GET pid %u %#llx: answered from file offset %llu, the page is at %llu", t->pid,
			  (unsigned long long)req->vaddr, (unsigned long long)(at - base),
			  (unsigned long long)want_off);
	for (uint64_t k = 0; k < nr; k++) {
		uint64_t pid, va;

		memcpy(&pid, data + (k << IMG_PAGE_SHIFT), 8);
		memcpy(&va, data + (k << IMG_PAGE_SHIFT) + 8, 8);
		if (pid != t->pid || va != req->vaddr + (k << IMG_PAGE_SHIFT))
			violation("GET pid %u %#llx: answer page %llu is pid %llu's %#llx", t->pid,
				  (unsigned long long)req->vaddr, (unsigned long long)k, (unsigned long long)pid,
				  (unsigned long long)va);
	}
	if (verbose)
		fprintf(stderr, "fuzz_pageserver: GET pid %u %#llx, %u pages: %llu pages from file offset %llu\n",
			t->pid, (unsigned long long)req->vaddr, req->nr_pages, (unsigned long long)nr,
			(unsigned long long)want_off);
}

static void check_get(const struct ps_iov *req)
{
	struct ps_iov reply = {0};
	const uint8_t *data = NULL;
	const struct entry *e = NULL;
	const struct task *t;
	char err[ERR_LEN];
	bool held = false;
	size_t ix = 0;
	int r;

	t = task_of(req->dst_id, &ix);
	if (t)
		e = entry_of(t, req->vaddr);
	/* held: a present page whose 4 KiB all lie in the mapping */
	if (e && (e->flags & IMG_PE_PRESENT))
		held = e->off + (req->vaddr - e->vaddr) + IMG_PAGE_SIZE <= imgs[ix].pages_size;
	memset(err, 0xa5, sizeof(err));
	r = ps_answer_get(imgs, nr_tasks, req, &reply, &data, NULL, err, sizeof(err));
	if (r != 0 && r != -1)
		violation("ps_answer_get returned %d", r);
	if (r == -1 && held)
		violation("GET pid %u %#llx refused, but its entry %#llx-%#llx holds it at file offset %llu of %llu "
			  "mapped (%.*s)",
			  t->pid, (unsigned long long)req->vaddr, (unsigned long long)e->vaddr,
			  (unsigned long long)e->end, (unsigned long long)(e->off + (req->vaddr - e->vaddr)),
			  (unsigned long long)imgs[ix].pages_size, ERR_LEN - 1, err);
	if (r == 0 && !held)
		violation("GET pid %llu %#llx answered, but the dump does not hold that page",
			  (unsigned long long)req->dst_id, (unsigned long long)req->vaddr);
	if (r == -1)
		return check_err("ps_answer_get", req, err);
	check_answer(req, t, &imgs[ix], e, &reply, data);
}

static void check_request(const struct ps_iov *req)
{
	int want = want_kind(req), r;
	char err[ERR_LEN];

	memset(err, 0xa5, sizeof(err));
	r = ps_check_request(req, err, sizeof(err));
	if (r != want)
		violation("ps_check_request(cmd %#x, %u pages, %#llx, pid %llu) = %d, want %d", req->cmd, req->nr_pages,
			  (unsigned long long)req->vaddr, (unsigned long long)req->dst_id, r, want);
	if (r == -1)
		check_err("ps_check_request", req, err);
	else if (r == PS_REQ_GET)
		check_get(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	struct ps_iov req;

	if (read_dump(&in) && load_dump())
		while (take(&in, &req, sizeof(req)))
			check_request(&req);
	unload_dump();
	return 0;
}
