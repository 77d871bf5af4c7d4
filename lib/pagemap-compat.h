/* PAGEMAP_SCAN (Linux 6.7 uapi linux/fs.h) and MADV_PAGEOUT (5.4), for older headers. */
#ifndef LR_PAGEMAP_COMPAT_H
#define LR_PAGEMAP_COMPAT_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#ifndef PAGEMAP_SCAN
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN	      _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#endif

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#endif
