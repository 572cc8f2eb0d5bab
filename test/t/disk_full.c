/*
 * disk_full.c — LD_PRELOAD library for 067_disk_full.pl: while the file
 * named by $LAKE_DISK_FULL exists, a write that would make a relation
 * file (under base/, not a temporary file) longer fails with ENOSPC, as
 * on a full disk; writes within a file's length (a page written back)
 * succeed, and the WAL is left alone (its ENOSPC is a PANIC, a crash).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int
refused(int fd, off_t offset, size_t len)
{
	const char *flag = getenv("LAKE_DISK_FULL");
	char		link[64];
	char		path[4096];
	struct stat st;
	ssize_t		n;

	if (flag == NULL || len == 0 || access(flag, F_OK) != 0)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	if (strstr(path, "/base/") == NULL || strstr(path, "/pgsql_tmp") != NULL)
		return 0;
	if (offset < 0 && (offset = lseek(fd, 0, SEEK_CUR)) < 0)
		return 0;
	return fstat(fd, &st) == 0 && offset + (off_t) len > st.st_size;
}

ssize_t
pwrite(int fd, const void *buf, size_t len, off_t offset)
{
	if (refused(fd, offset, len))
	{
		errno = ENOSPC;
		return -1;
	}
	return syscall(SYS_pwrite64, fd, buf, len, offset);
}

ssize_t		pwrite64(int fd, const void *buf, size_t len, off_t offset) __attribute__((alias("pwrite")));

ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t offset)
{
	size_t		len = 0;

	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (refused(fd, offset, len))
	{
		errno = ENOSPC;
		return -1;
	}
	return syscall(SYS_pwritev, fd, iov, cnt, (long) offset, 0L);
}

ssize_t		pwritev64(int fd, const struct iovec *iov, int cnt, off_t offset) __attribute__((alias("pwritev")));

ssize_t
write(int fd, const void *buf, size_t len)
{
	if (fd > 2 && refused(fd, -1, len))
	{
		errno = ENOSPC;
		return -1;
	}
	return syscall(SYS_write, fd, buf, len);
}
