/*
 * clock_shift.c — LD_PRELOAD library for 042_clock_step.pl: the wall
 * clock (gettimeofday, CLOCK_REALTIME) of every process of a test server
 * runs ahead by the number of seconds in the file $LAKE_CLOCK_SHIFT, read
 * at every call; the monotonic clock is left alone, as an NTP step leaves
 * it. Only what PostgreSQL reads the wall clock through is covered.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long
shift_seconds(void)
{
	const char *path = getenv("LAKE_CLOCK_SHIFT");
	char		buf[24];
	ssize_t		n;
	int			fd;

	if (path == NULL || (fd = open(path, O_RDONLY)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

int
clock_gettime(clockid_t clock, struct timespec *ts)
{
	int			rc = (int) syscall(SYS_clock_gettime, clock, ts);

	if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
		ts->tv_sec += shift_seconds();
	return rc;
}

int
gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;
	int			rc = clock_gettime(CLOCK_REALTIME, &ts);

	(void) tz;
	if (rc == 0 && tv != NULL)
	{
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return rc;
}

time_t
time(time_t *out)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (out != NULL)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
