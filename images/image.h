/* SPDX-License-Identifier: MIT */
/*
 * lazyrestore image library: a validating reader of CRIU's image files.
 *
 * Everything read here may come from another host, so nothing is trusted:
 * every record is bounds-checked and every failure fills a struct img_err
 * that names the file, the byte offset and the problem.  Functions return 0
 * on success and -1 on error (with *err filled).
 */
#ifndef LAZYRESTORE_IMAGE_H
#define LAZYRESTORE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMG_PAGE_SIZE  4096UL
#define IMG_PAGE_SHIFT 12

/* CRIU magics (criu/include/magic.h), host order u32. */
#define IMG_COMMON_MAGIC    0x54564319U
#define IMG_SERVICE_MAGIC   0x55105940U
#define IMG_INVENTORY_MAGIC 0x58313116U
#define IMG_PSTREE_MAGIC    0x50273030U
#define IMG_CORE_MAGIC	    0x55053847U
#define IMG_MM_MAGIC	    0x57492820U
#define IMG_PAGEMAP_MAGIC   0x56084025U

/* pagemap_entry.flags (criu/include/pagemap.h) */
#define IMG_PE_PARENT  (1U << 0)
#define IMG_PE_LAZY    (1U << 1)
#define IMG_PE_PRESENT (1U << 2)

/* vma_entry.status bits (criu/include/image.h) */
#define IMG_VMA_AREA_REGULAR  (1U << 0)
#define IMG_VMA_AREA_STACK    (1U << 1)
#define IMG_VMA_AREA_VSYSCALL (1U << 2)
#define IMG_VMA_AREA_VDSO     (1U << 3)
#define IMG_VMA_AREA_HEAP     (1U << 5)
#define IMG_VMA_FILE_PRIVATE  (1U << 6)
#define IMG_VMA_FILE_SHARED   (1U << 7)
#define IMG_VMA_ANON_SHARED   (1U << 8)
#define IMG_VMA_ANON_PRIVATE  (1U << 9)
#define IMG_VMA_AREA_SYSVIPC  (1U << 10)
#define IMG_VMA_AREA_SOCKET   (1U << 11)
#define IMG_VMA_AREA_VVAR     (1U << 12)
#define IMG_VMA_AREA_AIORING  (1U << 13)
#define IMG_VMA_AREA_MEMFD    (1U << 14)
#define IMG_VMA_AREA_SHSTK    (1U << 15)

/* task_core_entry.task_state */
#define IMG_TASK_ALIVE	 1
#define IMG_TASK_DEAD	 2
#define IMG_TASK_STOPPED 3

/* Upper bounds on what a sane dump holds; larger claims are errors. */
#define IMG_MAX_META_FILE (256UL << 20) /* any non-pages image file */
#define IMG_MAX_ENTRY	  (64U << 20)	/* one protobuf record */
#define IMG_MAX_TASKS	  (1U << 20)
#define IMG_MAX_VMAS	  (1U << 20)
#define IMG_MAX_THREADS	  (1U << 20)

struct img_err {
	char msg[512]; /* "FILE: offset N: problem" */
};

struct img_dir;

struct img_inventory {
	uint32_t img_version;
	bool fdinfo_per_id;
	uint64_t dump_uptime;
	bool has_dump_uptime;
	char *criu_run_id; /* NULL if absent */
	size_t nr_plugins;
	char **plugins;
};

struct img_task {
	uint32_t pid, ppid, pgid, sid; /* virtual pids, as in pstree.img */
	size_t nr_threads;
	uint32_t *threads;
	int state; /* IMG_TASK_*, from core-<pid>.img; 0 if unknown */
};

struct img_vma {
	uint64_t start, end, pgoff, shmid;
	uint32_t prot, flags, status;
	uint64_t madv;
};

struct img_pme {
	uint64_t vaddr;	   /* dump-time address, page-aligned */
	uint32_t nr_pages; /* > 0 */
	uint32_t flags;	   /* IMG_PE_* after CRIU's compat rules */
	uint64_t file_off; /* offset in pages-<pages_id>.img; valid with PE_PRESENT */
};

struct img_mm {
	uint32_t pid;
	size_t nr_vmas;
	struct img_vma *vmas; /* sorted, non-overlapping, page-aligned */
	uint32_t pages_id;
	size_t nr_pmes;
	struct img_pme *pmes; /* sorted, non-overlapping, each inside the VMAs */
	uint64_t pages_bytes; /* bytes of pages-<pages_id>.img the pagemap uses */
	bool thp_disabled;
};

/* A read-only mapping of pages-<id>.img. */
struct img_pages {
	uint32_t id;
	int fd;
	const uint8_t *base; /* NULL when size is 0 */
	uint64_t size;
};

int img_dir_open(const char *path, struct img_dir **out, struct img_err *err);
void img_dir_close(struct img_dir *d);
const char *img_dir_path(const struct img_dir *d);
int img_dir_fd(const struct img_dir *d);

int img_read_inventory(struct img_dir *d, struct img_inventory *inv, struct img_err *err);
void img_inventory_free(struct img_inventory *inv);

/* All pstree entries, zombies included, in file order; states from core-*.img. */
int img_read_pstree(struct img_dir *d, struct img_task **tasks, size_t *nr, struct img_err *err);
void img_tasks_free(struct img_task *tasks, size_t nr);

/*
 * mm-<pid>.img and pagemap-<pid>.img of one task, validated against each other
 * and against the size of pages-<pages_id>.img.
 */
int img_read_mm(struct img_dir *d, uint32_t pid, struct img_mm *mm, struct img_err *err);
void img_mm_free(struct img_mm *mm);

/* Index of the VMA / pagemap entry holding vaddr, or -1. O(log n). */
long img_find_vma(const struct img_mm *mm, uint64_t vaddr);
long img_find_pme(const struct img_mm *mm, uint64_t vaddr);

/*
 * File offset in pages-<pages_id>.img of the page at vaddr.  Returns 0 and sets
 * *off when the page is present in this image, -1 if it is not (no entry, or
 * the entry has no PE_PRESENT).
 */
int img_page_offset(const struct img_mm *mm, uint64_t vaddr, uint64_t *off);

/* Where the image holds the page at vaddr: one search for entry, file offset and run length. */
struct img_page_run {
	long pme;	/* index of the entry holding vaddr, or -1 */
	uint64_t off;	/* file offset of the page in pages-<pages_id>.img */
	uint64_t pages; /* pages of the entry from vaddr on */
};
/* 0 when the page at vaddr is present in the image; -1 if not (r->pme says whether an entry holds it). */
int img_lookup(const struct img_mm *mm, uint64_t vaddr, struct img_page_run *r);

/* CRIU's vma_entry_can_be_lazy(): private anonymous, not locked/hugetlb/vdso/vvar/vsyscall. */
bool img_vma_can_be_lazy(const struct img_vma *v);

/* A dump as the servers load it: pstree, inventory, the mm of every live task. */
struct img_dump {
	struct img_dir *dir;
	struct img_task *tasks;
	size_t nr_tasks;
	uint32_t *alive, *zombies; /* pids, pstree order */
	size_t nr_alive, nr_zombies;
	struct img_mm *mms; /* mms[i] is alive[i]'s */
};
int img_dump_load(const char *path, struct img_dump *d, struct img_err *err);
void img_dump_free(struct img_dump *d); /* also after a failed load */
const struct img_mm *img_dump_mm(const struct img_dump *d, uint32_t pid);

int img_pages_map(struct img_dir *d, uint32_t pages_id, struct img_pages *p, struct img_err *err);
void img_pages_unmap(struct img_pages *p);

#endif
