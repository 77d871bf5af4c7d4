// SPDX-License-Identifier: MIT
/* Journal storage: one sparse memfd, mapped shared before the engine forks. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin/log/log.h"
#include "plugin/supervisor/journal.h"

#define HEAD_SIZE  4096UL
#define AREAS_SIZE ((uint64_t)LR_JOURNAL_TASKS * LR_JOURNAL_MSGS * sizeof(struct uffd_msg))

int lr_journal_create(struct lr_journal *j)
{
	_Static_assert(sizeof(struct lr_journal_head) <= HEAD_SIZE, "journal head too big");
	void *p;

	j->fd = memfd_create("lazyrestore-journal", MFD_CLOEXEC);
	if (j->fd < 0 || ftruncate(j->fd, HEAD_SIZE + AREAS_SIZE)) {
		pr_perror("can't create the uffd journal");
		goto fail;
	}
	p = mmap(NULL, HEAD_SIZE + AREAS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, j->fd, 0);
	if (p == MAP_FAILED) {
		pr_perror("can't map the uffd journal");
		goto fail;
	}
	j->head = p;
	j->msgs = (struct uffd_msg *)((char *)p + HEAD_SIZE);
	return 0;
fail:
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	return -1;
}

void lr_journal_destroy(struct lr_journal *j)
{
	if (j->head)
		munmap(j->head, HEAD_SIZE + AREAS_SIZE);
	if (j->fd >= 0)
		close(j->fd);
	j->head = NULL;
	j->fd = -1;
}

uint64_t lr_journal_len(const struct lr_journal *j, unsigned idx)
{
	const struct uffd_msg *a = lr_journal_area(j, idx);
	uint64_t lo = 0, hi = LR_JOURNAL_MSGS;

	/* Entries are written front to back, so the filled part is a prefix. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (a[mid].event)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
