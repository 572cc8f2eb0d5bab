/*
 * zstd_small.c: what compressing one small payload costs, per way of
 * calling zstd (bench/RESULTS.md, stop 37). Reads hex payloads, one a line:
 *
 *   psql -Atc "SELECT encode(bench.payload256('r9-c1-' || g), 'hex')
 *              FROM generate_series(1, 1000) g" > payloads.hex
 *   cc -O2 bench/zstd_small.c -o zstd_small -lzstd && ./zstd_small payloads.hex
 *
 * Prints the best of five passes, ns per payload, and the mean size.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define MAXN 1000
#define MAXLEN 4096

static unsigned char payload[MAXN][MAXLEN];
static size_t payload_len[MAXN];

static double
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* As lake's codec.c calls it: reset, magicless format, level, compress2. */
static size_t
as_lake(ZSTD_CCtx *c, void *out, size_t cap, const void *in, size_t len, int level, int literals)
{
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_format, ZSTD_f_zstd1_magicless);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
	if (literals)
		ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
	return ZSTD_compress2(c, out, cap, in, len);
}

int
main(int argc, char **argv)
{
	static const struct
	{
		const char *name;
		int			level;
		int			raw_literals;
		int			simple;
	}			ways[] = {
		{"level 3, as lake", 3, 0, 0},
		{"level 3, ZSTD_compressCCtx", 3, 0, 1},
		{"level 1", 1, 0, 0},
		{"level 3, raw literals", 3, 1, 0},
		{"level -1", -1, 0, 0},
		{"level -3", -3, 0, 0},
	};
	FILE	   *f = fopen(argc > 1 ? argv[1] : "payloads.hex", "r");
	static char line[2 * MAXLEN + 2];
	unsigned char out[ZSTD_COMPRESSBOUND(MAXLEN)];
	ZSTD_CCtx  *c = ZSTD_createCCtx();
	int			n = 0;

	if (f == NULL)
	{
		perror("payloads");
		return 1;
	}
	while (n < MAXN && fgets(line, sizeof(line), f))
	{
		size_t		hex = strcspn(line, "\n");

		payload_len[n] = hex / 2;
		for (size_t i = 0; i < payload_len[n]; i++)
			sscanf(line + 2 * i, "%2hhx", &payload[n][i]);
		n++;
	}
	fclose(f);
	for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++)
	{
		double		best = 1e18;
		size_t		total = 0;

		for (int pass = 0; pass < 5; pass++)
		{
			double		t0 = now_ns();

			total = 0;
			for (int r = 0; r < 20; r++)
				for (int i = 0; i < n; i++)
				{
					size_t		z = ways[w].simple ?
						ZSTD_compressCCtx(c, out, sizeof(out), payload[i], payload_len[i], ways[w].level) :
						as_lake(c, out, sizeof(out), payload[i], payload_len[i], ways[w].level,
								ways[w].raw_literals);

					if (ZSTD_isError(z))
					{
						fprintf(stderr, "%s\n", ZSTD_getErrorName(z));
						return 1;
					}
					total += z;
				}
			if ((now_ns() - t0) / (20.0 * n) < best)
				best = (now_ns() - t0) / (20.0 * n);
		}
		printf("%-28s %7.0f ns  %zu B\n", ways[w].name, best, total / (20 * (size_t) n));
	}
	ZSTD_freeCCtx(c);
	return 0;
}
