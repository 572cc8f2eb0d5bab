/*
 * alloc_fail.c — LD_PRELOAD library for 043_alloc_fail.pl: makes one
 * allocation fail in a chosen server process. On SIGRTMIN+4 a process
 * reads the file $LAKE_ALLOC_FAIL_DIR/<its pid>, holding a number N, and
 * from then on its Nth call of malloc, calloc or realloc returns NULL
 * (ENOMEM), once. PostgreSQL's memory contexts take their blocks from
 * malloc, so a palloc fails where a block runs out, and so do the
 * allocations of the libraries lake uses (zstd, OpenSSL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);

static volatile long fail_at = 0;	/* 0: nothing armed */
static volatile long calls = 0;

static int
failing_now(void)
{
	if (fail_at <= 0 || ++calls != fail_at)
		return 0;
	fail_at = 0;
	errno = ENOMEM;
	return 1;
}

void *
malloc(size_t size)
{
	return failing_now() ? NULL : __libc_malloc(size);
}

void *
calloc(size_t n, size_t size)
{
	return failing_now() ? NULL : __libc_calloc(n, size);
}

void *
realloc(void *p, size_t size)
{
	return size > 0 && failing_now() ? NULL : __libc_realloc(p, size);
}

/* Only async-signal-safe calls: open, read, close and digits by hand. */
static void
arm(int sig)
{
	const char *dir = getenv("LAKE_ALLOC_FAIL_DIR");
	char		path[512];
	char		buf[24];
	long		n = 0;
	ssize_t		got;
	int			fd;
	int			save = errno;
	int			len = 0;
	char		digits[12];
	int			nd = 0;
	pid_t		pid = getpid();

	(void) sig;
	if (dir == NULL || strlen(dir) > sizeof(path) - 16)
		return;
	while (dir[len] != '\0')
	{
		path[len] = dir[len];
		len++;
	}
	path[len++] = '/';
	do
	{
		digits[nd++] = (char) ('0' + pid % 10);
		pid /= 10;
	} while (pid > 0);
	while (nd > 0)
		path[len++] = digits[--nd];
	path[len] = '\0';
	if ((fd = open(path, O_RDONLY)) >= 0)
	{
		got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < got && buf[i] >= '0' && buf[i] <= '9'; i++)
			n = n * 10 + (buf[i] - '0');
	}
	calls = 0;
	fail_at = n;
	errno = save;
}

__attribute__((constructor)) static void
install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = arm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN + 4, &sa, NULL);
}
