// SPDX-License-Identifier: MIT
/*
 * lazyrestore check: the kernel, host and criu facts this project depends on, one line each,
 * with what follows when a fact is missing.  Every probe is bounded in time, every child it
 * starts is killed and reaped, every fd and mapping it makes is released before the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "lib/uffd-compat.h"
#include "plugin/cli/check-util.h"
#include "plugin/cli/commands.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* PAGEMAP_SCAN (Linux 6.7, include/uapi/linux/fs.h): _IOWR('f', 16, struct pm_scan_arg), 96 bytes. */
#define CHECK_PM_SCAN_ARG_SIZE 96
#define CHECK_PAGEMAP_SCAN     _IOC(_IOC_READ | _IOC_WRITE, 'f', 16, CHECK_PM_SCAN_ARG_SIZE)

#define HWBP_WAIT_MS	 500
#define HWBP_STOP_MS	 2000
#define CRIU_VERSION_MS	 5000
#define CRIU_CHECK_MS	 15000
#define CHILD_OUT_MAX	 4096
#define PAGEMAP_SOFTDIRT (1ULL << 55)

/* The features criu restore --lazy-pages asks for and the daemon's ranges depend on. */
#define LAZY_FEATURES \
	(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP)

struct fact {
	const char *name;	 /* JSON name */
	const char *label;	 /* human label */
	bool required;		 /* a missing one makes the exit status 1 */
	bool ok;		 /* the fact holds */
	char value[256];	 /* what was found */
	const char *consequence; /* what follows when it does not hold */
};

#define MAX_FACTS 40
static struct fact facts[MAX_FACTS];
static size_t nr_facts;

static struct fact *add(const char *name, const char *label, bool required, const char *consequence)
{
	struct fact *f = &facts[nr_facts < MAX_FACTS - 1 ? nr_facts++ : MAX_FACTS - 1];

	memset(f, 0, sizeof(*f));
	f->name = name;
	f->label = label;
	f->required = required;
	f->consequence = consequence;
	return f;
}

static void __attribute__((format(printf, 3, 4))) set(struct fact *f, bool ok, const char *fmt, ...)
{
	va_list ap;

	f->ok = ok;
	va_start(ap, fmt);
	vsnprintf(f->value, sizeof(f->value), fmt, ap);
	va_end(ap);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Read a small file into buf (NUL-terminated, trailing newline cut); -1 with errno on failure. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* ---- host ------------------------------------------------------------------------------ */

static char host_cpu[128] = "unknown";
static char host_kernel[128] = "unknown";

static void probe_host(void)
{
	struct utsname u;
	char line[256];
	FILE *f;

	if (!uname(&u))
		snprintf(host_kernel, sizeof(host_kernel), "%s", u.release);
	f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !p)
			continue;
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		p[strcspn(p, "\n")] = '\0';
		snprintf(host_cpu, sizeof(host_cpu), "%s", p);
		break;
	}
	fclose(f);
}

/* ---- userfaultfd ------------------------------------------------------------------------- */

static void probe_uffd_syscall(bool *usable)
{
	struct fact *f = add("userfaultfd_syscall", "userfaultfd syscall", false,
			     "criu restore --lazy-pages needs userfaultfd(2) (patched criu falls back to "
			     "/dev/userfaultfd); EPERM: run as root or set vm.unprivileged_userfaultfd=1; "
			     "ENOSYS: kernel built without CONFIG_USERFAULTFD");
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0) {
		close(fd);
		set(f, true, "ok");
		*usable = true;
	} else {
		set(f, false, "%s (%s)", strerrorname_np(errno) ?: "error", strerror(errno));
	}
}

static void probe_uffd_dev(bool *usable)
{
	struct fact *f = add("dev_userfaultfd", "/dev/userfaultfd", false,
			     "no fallback when userfaultfd(2) is refused (e.g. a restore into a user "
			     "namespace); needs Linux >= 6.1 and access to /dev/userfaultfd");
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), fd;

	if (dev < 0) {
		set(f, false, "open: %s", strerror(errno));
		return;
	}
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		set(f, false, "USERFAULTFD_IOC_NEW: %s", strerror(errno));
	} else {
		set(f, true, "open + USERFAULTFD_IOC_NEW");
		*usable = true;
		close(fd);
	}
	close(dev);
}

struct feature {
	uint64_t bit;
	const char *name, *label;
	bool required;
	const char *consequence;
};

static const struct feature features[] = {
    {UFFD_FEATURE_EVENT_FORK, "uffd_event_fork", "uffd EVENT_FORK", true,
     "a restored task's fork() after the restore leaves the child's lazy pages unserved"},
    {UFFD_FEATURE_EVENT_REMAP, "uffd_event_remap", "uffd EVENT_REMAP", true,
     "mremap() of a lazy area moves pages the daemon would then serve at the old address"},
    {UFFD_FEATURE_EVENT_REMOVE, "uffd_event_remove", "uffd EVENT_REMOVE", true,
     "madvise(DONTNEED) pages would be refilled with stale image data instead of zeroes"},
    {UFFD_FEATURE_EVENT_UNMAP, "uffd_event_unmap", "uffd EVENT_UNMAP", true,
     "munmap() of a lazy area is not seen; a new mapping there could get stale image data"},
    {UFFD_FEATURE_SIGBUS, "uffd_sigbus", "uffd SIGBUS", false,
     "libuserfault's MADV_USERFAULT emulation (SIGBUS on a missing page) is unavailable"},
    {UFFD_FEATURE_THREAD_ID, "uffd_thread_id", "uffd THREAD_ID", false,
     "fault messages do not name the faulting thread (statistics per thread only)"},
    /* index 6: probe_uffd_features refines it */
    {UFFD_FEATURE_MOVE, "uffd_move", "uffd MOVE", false,
     "no UFFDIO_MOVE (Linux >= 6.8): libuserfault's remap_anon_pages() cannot move pages"},
    {UFFD_FEATURE_PAGEFAULT_FLAG_WP, "uffd_wp", "uffd WP", false,
     "no write-protect tracking through userfaultfd (a dirty-tracking alternative to soft-dirty)"},
    {UFFD_FEATURE_WP_ASYNC, "uffd_wp_async", "uffd WP_ASYNC", false,
     "no asynchronous write-protect (Linux >= 6.7), the basis of PAGEMAP_SCAN dirty tracking"},
    {UFFD_FEATURE_MISSING_HUGETLBFS, "uffd_missing_hugetlbfs", "uffd MISSING_HUGETLBFS", false,
     "hugetlbfs mappings cannot be lazy (criu restores them eagerly)"},
    {UFFD_FEATURE_MISSING_SHMEM, "uffd_missing_shmem", "uffd MISSING_SHMEM", false,
     "shared memory cannot be lazy (criu restores it eagerly)"},
};

static void probe_uffd_features(bool usable, bool *required_ok)
{
	struct fact *api = add("uffd_api", "uffd API handshake", true,
			       "lazy restore impossible: UFFDIO_API with EVENT_FORK|REMAP|REMOVE|UNMAP refused");
	struct fact *miss = add("uffd_missing_anon", "uffd MISSING on anon", true,
				"lazy restore impossible: anonymous memory cannot be registered for missing faults");
	struct fact *feat[sizeof(features) / sizeof(features[0])];
	struct fact *zero;
	struct fact *wpreg;
	struct fact *scan;
	struct uffdio_api a = {.api = UFFD_API};
	uint64_t avail = 0;
	bool dev;
	int fd, pm;

	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
		feat[i] = add(features[i].name, features[i].label, features[i].required, features[i].consequence);
	zero = add("uffd_zeropage", "uffd ZEROPAGE", false,
		   "zero pages of the image must be copied as 4 KiB of zeroes (UFFDIO_COPY)");
	wpreg = add("uffd_wp_anon", "uffd register WP on anon", false,
		    "anonymous memory cannot be write-protected through userfaultfd");
	scan = add("pagemap_scan", "PAGEMAP_SCAN", false,
		   "no PAGEMAP_SCAN ioctl (Linux >= 6.7): dirty pages must be found by reading pagemap");

	fd = usable ? lr_uffd_open(O_CLOEXEC | O_NONBLOCK, false, &dev) : -1;
	if (fd < 0) {
		set(api, false, "no userfaultfd");
	} else if (ioctl(fd, UFFDIO_API, &a)) {
		set(api, false, "UFFDIO_API (query): %s", strerror(errno));
	} else {
		avail = a.features;
	}
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
		set(feat[i], avail & features[i].bit, "%s", avail & features[i].bit ? "yes" : "no");

	/* The handshake criu's restorer makes, then a MISSING registration of private anon memory. */
	if (avail) {
		struct uffdio_api b = {.api = UFFD_API, .features = LAZY_FEATURES | (avail & UFFD_FEATURE_MOVE)};
		size_t len = 4 * 4096;
		void *m;

		fd = lr_uffd_open(O_CLOEXEC | O_NONBLOCK, false, &dev);
		if (fd < 0 || ioctl(fd, UFFDIO_API, &b)) {
			set(api, false, "UFFDIO_API features 0x%llx: %s", (unsigned long long)(LAZY_FEATURES),
			    strerror(errno));
		} else {
			set(api, true, "api %llu, %s, features 0x%llx", (unsigned long long)b.api,
			    dev ? "/dev/userfaultfd" : "syscall", (unsigned long long)avail);
			m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m != MAP_FAILED) {
				struct uffdio_register r = {.range = {.start = (uintptr_t)m, .len = len},
							    .mode = UFFDIO_REGISTER_MODE_MISSING};
				if (ioctl(fd, UFFDIO_REGISTER, &r)) {
					set(miss, false, "UFFDIO_REGISTER: %s", strerror(errno));
				} else {
					bool copy = r.ioctls & (1ULL << _UFFDIO_COPY);

					set(miss, copy, "%s", copy ? "UFFDIO_COPY allowed" : "no UFFDIO_COPY");
					set(zero, r.ioctls & (1ULL << _UFFDIO_ZEROPAGE), "%s",
					    r.ioctls & (1ULL << _UFFDIO_ZEROPAGE) ? "yes" : "no");
					if ((avail & UFFD_FEATURE_MOVE) && !(r.ioctls & (1ULL << _UFFDIO_MOVE)))
						set(feat[6], false, "feature bit set but no UFFDIO_MOVE on anon");
					else if (avail & UFFD_FEATURE_MOVE)
						set(feat[6], true, "yes (UFFDIO_MOVE allowed)");
					ioctl(fd, UFFDIO_UNREGISTER, &r.range);
				}
				/* Close first: with EVENT_UNMAP on, munmap() waits for a reader of the event. */
				close(fd);
				fd = -1;
				munmap(m, len);
			} else {
				set(miss, false, "mmap: %s", strerror(errno));
			}
		}
		if (fd >= 0)
			close(fd);
	}
	if (!avail) {
		set(miss, false, "no handshake");
		set(zero, false, "no handshake");
	}

	/* Write-protect: a handshake with PAGEFAULT_FLAG_WP and a WP registration. */
	if (avail & UFFD_FEATURE_PAGEFAULT_FLAG_WP) {
		struct uffdio_api c = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		fd = lr_uffd_open(O_CLOEXEC | O_NONBLOCK, false, &dev);
		if (fd < 0 || m == MAP_FAILED || ioctl(fd, UFFDIO_API, &c)) {
			set(wpreg, false, "handshake: %s", strerror(errno));
		} else {
			struct uffdio_register r = {.range = {.start = (uintptr_t)m, .len = 4096},
						    .mode = UFFDIO_REGISTER_MODE_WP};
			if (ioctl(fd, UFFDIO_REGISTER, &r))
				set(wpreg, false, "UFFDIO_REGISTER WP: %s", strerror(errno));
			else
				set(wpreg, r.ioctls & (1ULL << _UFFDIO_WRITEPROTECT), "%s",
				    r.ioctls & (1ULL << _UFFDIO_WRITEPROTECT) ? "yes" : "no UFFDIO_WRITEPROTECT");
			ioctl(fd, UFFDIO_UNREGISTER, &r.range);
		}
		if (fd >= 0)
			close(fd);
		if (m != MAP_FAILED)
			munmap(m, 4096);
	} else {
		set(wpreg, false, "no WP feature");
	}

	/* PAGEMAP_SCAN: a kernel that knows it rejects a zero-sized argument with EINVAL. */
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0) {
		set(scan, false, "/proc/self/pagemap: %s", strerror(errno));
	} else {
		uint64_t arg[CHECK_PM_SCAN_ARG_SIZE / 8] = {0};
		int r = ioctl(pm, CHECK_PAGEMAP_SCAN, arg);

		if (r >= 0 || errno == EINVAL)
			set(scan, true, "yes");
		else
			set(scan, false, "no (%s)", strerror(errno));
		close(pm);
	}

	for (size_t i = 0; i < nr_facts; i++)
		if (facts[i].required && !facts[i].ok)
			*required_ok = false;
}

/* ---- hardware breakpoints ---------------------------------------------------------------- */

/* Wait for pid to change state, at most ms milliseconds; 0 and *status, or -1 on timeout. */
static int wait_bounded(pid_t pid, long ms, int *status)
{
	long deadline = now_ms() + ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ms() >= deadline)
			return -1;
		sleep_ms(2);
	}
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

static volatile int hwbp_calls;

/* The breakpointed function: kept out of line and not folded away. */
static __attribute__((noinline)) void hwbp_target(void)
{
	hwbp_calls++;
	__asm__ volatile("" ::: "memory");
}

/* 1: a breakpoint fired; 0: it did not; -1: could not be set (why in buf). */
static int hwbp_probe(char *buf, size_t size)
{
#if defined(__x86_64__) || defined(__i386__)
	int st, ret = -1;
	pid_t pid = fork();

	if (pid < 0) {
		snprintf(buf, size, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(3);
		raise(SIGSTOP);
		hwbp_target();
		_exit(0);
	}
	/* Its first stop is not what is measured: a loaded host gets longer than the 500 ms. */
	if (wait_bounded(pid, HWBP_STOP_MS, &st) || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		snprintf(buf, size, "probe child did not stop");
		goto out;
	}
	/* DR0 = address; DR7 = L0 enable, RW0 = 00 (execute), LEN0 = 00. */
	if (ptrace(PTRACE_POKEUSER, pid, offsetof(struct user, u_debugreg[0]), (void *)hwbp_target) ||
	    ptrace(PTRACE_POKEUSER, pid, offsetof(struct user, u_debugreg[7]), (void *)1UL)) {
		snprintf(buf, size, "PTRACE_POKEUSER of DR0/DR7: %s", strerror(errno));
		goto out;
	}
	if (ptrace(PTRACE_CONT, pid, NULL, NULL)) {
		snprintf(buf, size, "PTRACE_CONT: %s", strerror(errno));
		goto out;
	}
	if (wait_bounded(pid, HWBP_WAIT_MS, &st)) {
		snprintf(buf, size, "no SIGTRAP within %d ms", HWBP_WAIT_MS);
		ret = 0;
	} else if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP) {
		snprintf(buf, size, "SIGTRAP at the breakpoint");
		ret = 1;
	} else if (WIFEXITED(st)) {
		snprintf(buf, size, "child ran through the breakpoint and exited");
		ret = 0;
	} else {
		snprintf(buf, size, "child stopped by signal %d, not SIGTRAP", WIFSTOPPED(st) ? WSTOPSIG(st) : -1);
		ret = 0;
	}
out:
	kill_reap(pid);
	return ret;
#else
	snprintf(buf, size, "not x86");
	return -1;
#endif
}

/* ---- capabilities, pipes, THP, soft-dirty ------------------------------------------------ */

static void probe_caps_pipes(void)
{
	struct fact *cap = add("cap_sys_resource", "CAP_SYS_RESOURCE", false,
			       "pipes cannot grow past fs.pipe-max-size: stock criu page-server/lazy-pages "
			       "over the network may fail (lazyrestore page-server needs no pipes)");
	struct fact *pms = add("pipe_max_size", "fs.pipe-max-size", false,
			       "below 4 MiB and without CAP_SYS_RESOURCE, stock criu's page pipes (F_SETPIPE_SZ) "
			       "are refused: remote lazy pages fail; sysctl fs.pipe-max-size=4194304 or use "
			       "lazyrestore page-server");
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2] = {{0}};
	bool have = false;
	char buf[64];

	if (syscall(SYS_capget, &h, d)) {
		set(cap, false, "capget: %s", strerror(errno));
	} else {
		have = d[CAP_SYS_RESOURCE / 32].effective & (1U << (CAP_SYS_RESOURCE % 32));
		set(cap, have, "%s", have ? "yes (effective)" : "no");
	}
	if (read_small("/proc/sys/fs/pipe-max-size", buf, sizeof(buf)))
		set(pms, false, "/proc/sys/fs/pipe-max-size: %s", strerror(errno));
	else /*
	      * Without the capability, criu's page-pipe asks F_SETPIPE_SZ for PIPE_MAX_SIZE pages
	      * (819 on x86_64), which the kernel rounds up to 1024 pages: 4 MiB.
	      */
		set(pms, have || strtoull(buf, NULL, 10) >= (4ULL << 20), "%s", buf);
}

static void probe_thp(void)
{
	struct fact *en = add("thp_enabled", "THP enabled", false,
			      "no transparent huge pages: restored memory is served and mapped 4 KiB at a time");
	struct fact *df =
	    add("thp_defrag", "THP defrag", false, "informational: how the kernel compacts memory for huge pages");
	struct fact *col = add("madv_collapse", "MADV_COLLAPSE", false,
			       "served 4 KiB pages cannot be collapsed into huge pages afterwards (Linux >= 6.1)");
	char buf[256], mode[64];
	size_t len = 4UL << 20;
	char *m;

	if (read_small("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf))) {
		set(en, false, "%s", strerror(errno));
	} else {
		check_bracketed(buf, mode, sizeof(mode));
		set(en, strcmp(mode, "never"), "%s", mode);
	}
	if (read_small("/sys/kernel/mm/transparent_hugepage/defrag", buf, sizeof(buf))) {
		set(df, false, "%s", strerror(errno));
	} else {
		check_bracketed(buf, mode, sizeof(mode));
		set(df, true, "%s", mode);
	}

	/* Collapse one aligned 2 MiB of touched anonymous memory. */
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		set(col, false, "mmap: %s", strerror(errno));
		return;
	}
	{
		char *p = (char *)(((uintptr_t)m + (2UL << 20) - 1) & ~((2UL << 20) - 1));

		for (size_t i = 0; i < (2UL << 20); i += 4096)
			p[i] = 1;
		if (!madvise(p, 2UL << 20, MADV_COLLAPSE))
			set(col, true, "yes (collapsed 2 MiB)");
		else if (errno == EINVAL)
			set(col, false, "no (EINVAL)");
		else /* known to the kernel but refused now (EAGAIN/ENOMEM/EPERM) */
			set(col, true, "known, refused now: %s", strerror(errno));
	}
	munmap(m, len);
}

static int pagemap_entry(int pm, const void *addr, uint64_t *e)
{
	off_t off = (off_t)((uintptr_t)addr / 4096) * 8;

	return pread(pm, e, sizeof(*e), off) == sizeof(*e) ? 0 : -1;
}

static void probe_soft_dirty(void)
{
	struct fact *f = add("soft_dirty", "soft-dirty", false,
			     "no memory change tracking: criu pre-dump / incremental dumps (--track-mem) "
			     "are impossible; every dump is a full one");
	volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t before = 0, after = 0;
	int pm = -1, cr = -1;

	if (p == MAP_FAILED) {
		set(f, false, "mmap: %s", strerror(errno));
		return;
	}
	p[0] = 1;
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	cr = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (pm < 0 || cr < 0) {
		set(f, false, "open pagemap/clear_refs: %s", strerror(errno));
		goto out;
	}
	if (write(cr, "4", 1) != 1) {
		set(f, false, "clear_refs 4: %s", strerror(errno));
		goto out;
	}
	if (pagemap_entry(pm, (const void *)p, &before))
		goto err;
	p[0] = 2;
	if (pagemap_entry(pm, (const void *)p, &after))
		goto err;
	if (!(before & PAGEMAP_SOFTDIRT) && (after & PAGEMAP_SOFTDIRT))
		set(f, true, "yes (bit 55 cleared by clear_refs 4, set by a write)");
	else
		set(f, false, "no (bit 55 %s after clear_refs, %s after a write)",
		    before & PAGEMAP_SOFTDIRT ? "set" : "clear", after & PAGEMAP_SOFTDIRT ? "set" : "clear");
	goto out;
err:
	set(f, false, "pagemap read: %s", strerror(errno));
out:
	if (pm >= 0)
		close(pm);
	if (cr >= 0)
		close(cr);
	munmap((void *)p, 4096);
}

/* ---- criu -------------------------------------------------------------------------------- */

/*
 * Run argv with stdin /dev/null, stdout+stderr into out, in its own process group, at most
 * ms milliseconds; the whole group is killed on timeout and the child always reaped.
 * Returns its exit status, 128+signal, -2 on timeout, -1 if it could not be started.
 */
static int run_bounded(char *const argv[], long ms, char *out, size_t size)
{
	long deadline = now_ms() + ms;
	size_t len = 0;
	int p[2], st, ret;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	setpgid(pid, pid);
	close(p[1]);
	for (;;) {
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		long left = deadline - now_ms();
		char tmp[512];
		ssize_t n;

		if (left <= 0)
			break;
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(p[0], tmp, sizeof(tmp));
		if (n <= 0)
			break;
		if (len + 1 < size) {
			size_t c = (size_t)n < size - 1 - len ? (size_t)n : size - 1 - len;

			memcpy(out + len, tmp, c);
			len += c;
			out[len] = '\0';
		}
	}
	close(p[0]);
	/* Exited (seen without reaping, so its pid and group id stay ours), or late: kill its group. */
	for (;;) {
		siginfo_t si = {0};

		if (!waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid)
			break;
		if (now_ms() >= deadline) {
			kill(-pid, SIGKILL);
			kill_reap(pid);
			return -2;
		}
		sleep_ms(2);
	}
	kill(-pid, SIGKILL); /* anything it left in its group */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ret = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return ret;
}

static bool executable(const char *path)
{
	struct stat s;

	return !stat(path, &s) && S_ISREG(s.st_mode) && !access(path, X_OK);
}

/* $CRIU, else build/criu/criu beside this binary, else criu on PATH. */
static const char *find_criu(char *buf, size_t size, const char **how)
{
	const char *env = getenv("CRIU"), *path = getenv("PATH");
	char self[PATH_MAX - 32]; /* room for "/criu/criu" in buf */
	ssize_t n;

	if (env && *env) {
		*how = "$CRIU";
		snprintf(buf, size, "%s", env);
		return executable(buf) ? buf : NULL;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(buf, size, "%s/criu/criu", self);
			*how = "beside lazyrestore";
			if (executable(buf))
				return buf;
		}
	}
	*how = "PATH";
	while (path && *path) {
		size_t l = strcspn(path, ":");

		snprintf(buf, size, "%.*s/criu", (int)l, path);
		if (l && executable(buf))
			return buf;
		path += l + (path[l] == ':');
	}
	return NULL;
}

static void probe_criu(int hwbp)
{
	struct fact *c = add("criu", "criu", false,
			     "no criu found (looked at $CRIU, build/criu/criu beside lazyrestore, PATH): "
			     "nothing can be dumped or restored; run make");
	struct fact *hb = add("criu_hw_breakpoints", "criu agrees on hw breakpoints", false,
			      "this criu has no 'check --feature hw_breakpoints' (unpatched 4.1.1): on a host "
			      "whose breakpoints do not fire its dumps hang unless CRIU_FAULT=130 is set");
	char bin[PATH_MAX], out[CHILD_OUT_MAX];
	const char *how, *crit;
	int r;

	crit = find_criu(bin, sizeof(bin), &how);
	if (!crit) {
		set(c, false, "not found (%s: %s)", how, bin);
		set(hb, false, "no criu");
		return;
	}
	{
		char *argv[] = {bin, "--version", NULL};

		r = run_bounded(argv, CRIU_VERSION_MS, out, sizeof(out));
	}
	if (r) {
		set(c, false, "%s: --version %s", bin, r == -2 ? "timed out" : "failed");
		set(hb, false, "criu does not run");
		return;
	}
	{
		char *v = strstr(out, "Version:");

		if (v)
			v += strlen("Version:");
		while (v && *v == ' ')
			v++;
		set(c, true, "%s (%s), version %.*s", bin, how, v ? (int)strcspn(v, "\n") : 7, v ?: "unknown");
	}

	/* One run: a criu without the feature says "Unknown feature" (and never probes). */
	{
		char *argv[] = {bin, "check", "--feature", "hw_breakpoints", NULL};

		r = run_bounded(argv, CRIU_CHECK_MS, out, sizeof(out));
	}
	if (r != -2 && strstr(out, "Unknown feature")) {
		set(hb, false, "no hw_breakpoints feature in this criu");
		return;
	}
	if (r == -2) {
		set(hb, false, "'criu check --feature hw_breakpoints' timed out after %d ms", CRIU_CHECK_MS);
		hb->consequence = "this criu's own check hangs (killed): expect its dumps to hang too; "
				  "set CRIU_FAULT=130 or use a criu with criu-patches/0006";
	} else if (hwbp < 0) {
		set(hb, false, "criu says %s, our probe could not run", r ? "they do not fire" : "they fire");
	} else {
		bool crit_fires = r == 0;

		set(hb, crit_fires == (hwbp == 1), "criu says %s (exit %d), our probe says %s%s",
		    crit_fires ? "they fire" : "they do not fire", r, hwbp ? "they fire" : "they do not fire",
		    crit_fires == (hwbp == 1) ? "" : ": DISAGREE");
		if (crit_fires != (hwbp == 1))
			hb->consequence = "criu and lazyrestore disagree on this host's debug registers: "
					  "report it with both outputs";
	}
}

/* ---- output ------------------------------------------------------------------------------ */

static void print_json(FILE *o)
{
	fprintf(o, "{\"host\": {\"cpu\": ");
	check_json_str(o, host_cpu);
	fprintf(o, ", \"kernel\": ");
	check_json_str(o, host_kernel);
	fprintf(o, "}, \"facts\": [");
	for (size_t i = 0; i < nr_facts; i++) {
		fprintf(o, "%s\n  {\"name\": ", i ? "," : "");
		check_json_str(o, facts[i].name);
		fprintf(o, ", \"ok\": %s, \"value\": ", facts[i].ok ? "true" : "false");
		check_json_str(o, facts[i].value);
		fprintf(o, ", \"consequence\": ");
		check_json_str(o, facts[i].consequence);
		fputc('}', o);
	}
	fprintf(o, "\n]}\n");
}

static void print_text(FILE *o, bool required_ok)
{
	const int width = 34;

	fprintf(o, "%-*s %s\n", width, "cpu", host_cpu);
	fprintf(o, "%-*s %s\n", width, "kernel", host_kernel);
	for (size_t i = 0; i < nr_facts; i++) {
		const struct fact *f = &facts[i];
		int l = (int)strlen(f->label);

		fprintf(o, "%s ", f->label);
		for (int d = l + 1; d < width; d++)
			fputc('.', o);
		if (f->ok && (!strcmp(f->value, "ok") || !strcmp(f->value, "yes")))
			fprintf(o, " ok\n");
		else if (f->ok)
			fprintf(o, " ok: %s\n", f->value);
		else
			fprintf(o, " NO%s: %s [%s]\n", f->required ? " (required)" : "", f->consequence, f->value);
	}
	fprintf(o, "%s\n",
		required_ok ? "required facts: all hold (lazy restore works on this host)"
			    : "required facts: MISSING (see the lines marked required): lazy restore cannot work here");
}

static const char check_usage[] =
    "usage: lazyrestore check [--json]\n"
    "\n"
    "Probe the kernel, the host and the criu build for every fact lazyrestore depends on and\n"
    "print one line per fact: its name, 'ok' with what was found, or 'NO' with what follows\n"
    "when it is missing (and, in brackets, what was found). Like 'criu check', for this project.\n"
    "\n"
    "Required facts (a missing one makes the exit status 1): userfaultfd usable through the\n"
    "syscall or /dev/userfaultfd, the UFFDIO_API handshake with EVENT_FORK|REMAP|REMOVE|UNMAP,\n"
    "each of those four events, and MISSING registration of private anonymous memory.\n"
    "Optional facts (reported, never failing): SIGBUS, THREAD_ID, MOVE, ZEROPAGE, WP, WP_ASYNC,\n"
    "PAGEMAP_SCAN, MISSING_HUGETLBFS/SHMEM, x86 hardware breakpoints (a ptrace probe: does a\n"
    "DR0/DR7 execute breakpoint stop a child within 500 ms?), CAP_SYS_RESOURCE, fs.pipe-max-size,\n"
    "THP mode and defrag, MADV_COLLAPSE, soft-dirty (clear_refs 4 and pagemap bit 55), the criu\n"
    "binary found and whether its 'criu check --feature hw_breakpoints' agrees with the probe.\n"
    "\n"
    "criu is looked for as $CRIU, else criu/criu beside this binary (build/criu/criu), else on\n"
    "PATH. Every probe is bounded in time (criu runs at most 15 s, in its own process group);\n"
    "children are always killed and reaped. Run it as root: as another user the answers are\n"
    "those of that user.\n"
    "\n"
    "options:\n"
    "  -j, --json    one JSON document on stdout:\n"
    "                {\"host\": {\"cpu\": S, \"kernel\": S},\n"
    "                 \"facts\": [{\"name\": S, \"ok\": B, \"value\": S, \"consequence\": S}, ...]}\n"
    "                (consequence: what follows when the fact does not hold, given always)\n"
    "  -h, --help    this text\n"
    "\n"
    "exit status: 0 every required fact holds, 1 a required fact is missing, 2 bad usage.\n";

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	bool json = false, usable = false, required_ok = true;
	struct fact *uf, *hb;
	char hbuf[128];
	int c, hwbp;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(check_usage, stdout);
			return 0;
		default:
			fprintf(stderr, "lazyrestore check: see 'lazyrestore check --help'\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lazyrestore check: unexpected argument '%s'\n", argv[optind]);
		fprintf(stderr, "usage: lazyrestore check [--json]\n");
		return 2;
	}

	nr_facts = 0;
	probe_host();
	uf = add("userfaultfd", "userfaultfd usable", true,
		 "lazy restore impossible: neither userfaultfd(2) nor /dev/userfaultfd gives a uffd");
	probe_uffd_syscall(&usable);
	probe_uffd_dev(&usable);
	set(uf, usable, "%s", usable ? "yes" : "no");
	probe_uffd_features(usable, &required_ok);

	hb = add("hw_breakpoints", "hw breakpoints", false,
		 "criu 4.1.1 would hang in dump; patched criu uses PTRACE_SYSCALL");
	hwbp = hwbp_probe(hbuf, sizeof(hbuf));
	set(hb, hwbp == 1, "%s", hbuf);
	if (hwbp < 0)
		hb->consequence = "the probe could not run: whether criu 4.1.1 hangs in dump is unknown; "
				  "if it does, set CRIU_FAULT=130 or use a criu with criu-patches/0006";

	probe_caps_pipes();
	probe_thp();
	probe_soft_dirty();
	probe_criu(hwbp);

	for (size_t i = 0; i < nr_facts; i++)
		if (facts[i].required && !facts[i].ok)
			required_ok = false;
	if (json)
		print_json(stdout);
	else
		print_text(stdout, required_ok);
	fflush(stdout);
	return required_ok ? 0 : 1;
}
