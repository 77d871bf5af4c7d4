// SPDX-License-Identifier: MIT
/* The client's answer parser (see answer.h). */
#include <stdio.h>

#include "plugin/transport/answer.h"

void *psa_want(struct psa *a, const struct psa_req *head, size_t *len)
{
	if (!a->in_data || !head) {
		*len = ps_hdr_size(a->wire) - a->got;
		return a->hdr + a->got;
	}
	*len = (size_t)a->ans.nr_pages * PSA_PAGE_SIZE - a->got;
	return head->dest + a->got;
}

int psa_got(struct psa *a, const struct psa_req *head, size_t n, uint32_t *pages, char *err, size_t errlen)
{
	char why[160];

	a->got += n;
	a->off += n;
	if (!a->in_data) {
		if (a->got < ps_hdr_size(a->wire))
			return PSA_MORE;
		a->ans_off = a->off - a->got;
		if (!head) {
			snprintf(err, errlen, "offset %llu: an answer when no request is outstanding",
				 (unsigned long long)a->ans_off);
			return PSA_ERROR;
		}
		struct ps_iov req = {PS_IOV_GET, head->left, head->vaddr, head->pid};

		if (ps_hdr_decode(a->wire, a->hdr, &a->ans, why, sizeof(why)) ||
		    ps_check_answer(&a->ans, &req, why, sizeof(why))) {
			snprintf(err, errlen, "offset %llu: to GET pid %u %#llx %u pages: %s",
				 (unsigned long long)a->ans_off, head->pid, (unsigned long long)head->vaddr, head->left,
				 why);
			return PSA_ERROR;
		}
		a->in_data = true;
		a->got = 0;
		return PSA_MORE;
	}
	if (a->got < (size_t)a->ans.nr_pages * PSA_PAGE_SIZE)
		return PSA_MORE;
	*pages = a->ans.nr_pages;
	a->in_data = false;
	a->got = 0;
	return PSA_ANSWER;
}
