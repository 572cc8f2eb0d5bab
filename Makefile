# lake — PGXS build. `make && make install`, then `make check` runs every
# suite (layers, regress, isolation, TAP, a short fuzzing run) against throwaway
# servers; run it as a non-root user (scripts/test.sh does the set-up as
# root). `make fuzz` fuzzes longer; `make check-valgrind` runs the regress
# and isolation suites with the server under valgrind.

EXTENSION   = lake
EXTVERSION  = 0.1.0
MODULE_big  = lake
OBJS        = src/lake.o src/guc.o src/args.o src/hold.o src/admission.o src/codec.o \
              src/digest.o src/encode.o src/durable.o src/schema.o src/store_rel.o src/store_row.o \
              src/store.o src/store_blob.o src/store_version.o src/store_stage.o src/store_grant.o \
              src/store_owner.o src/store_dict.o \
              src/access.o src/head.o src/operation.o \
              src/append.o src/dict.o src/stage.o src/lifecycle.o src/owner.o \
              src/landing.o src/owner_index.o src/cycle.o src/waiter.o src/publish.o src/seal.o \
              src/logread.o src/history.o src/recovery.o src/checkpoint.o src/cast.o \
              src/worker.o
DATA        = sql/lake--$(EXTVERSION).sql
SHLIB_LINK  = -lzstd -lcrypto
PG_CPPFLAGS = -I$(srcdir)/src
# Warnings are errors in the project's own builds (scripts/setup.sh passes
# WERROR=-Werror); not by default, where another compiler than the one
# PostgreSQL was built with (clang, under gcc-only PGXS flags) or a newer
# one would refuse to build at all.
WERROR     ?=
PG_CFLAGS   = -Wall $(WERROR)
EXTRA_CLEAN = results output_iso tmp_check log regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)

include $(PGXS)

# PGXS tracks no header dependencies: rebuild every object when a header
# changes (a stale object reading an old struct layout is a silent bug).
# After the include, so that PGXS's "all" stays the default goal. An
# out-of-tree build (make -f <source>/Makefile VPATH=<source>) writes its
# objects (and, with LLVM, their bitcode) under its own src/.
$(OBJS) $(OBJS:.o=.bc): $(wildcard $(srcdir)/src/*.h) | objdir
.PHONY: objdir
objdir:
	@mkdir -p src

# The router extension (router/, SPEC §7) is built, installed and cleaned
# with lake; its TAP test is test/t/014_router.pl.
.PHONY: router-all router-install router-clean router-uninstall
all: router-all
install: router-install
clean: router-clean
uninstall: router-uninstall
router-all router-install router-clean router-uninstall: router-%:
	$(MAKE) -C $(srcdir)/router VPATH= PG_CONFIG=$(PG_CONFIG) $*

PGXS_DIR  := $(dir $(PGXS))
BINDIR    := $(shell $(PG_CONFIG) --bindir)
REGRESS_T := extension append read stage tenant cast lifecycle recovery admission guc worker \
             hostile privileges memory damage owner_tenant integrity rolecap recreate dictionary head operation_key \
             owner_index search_path readonly extowner

.PHONY: check check-layers check-regress check-isolation check-tap check-fuzz fuzz check-valgrind bench

check: check-layers check-regress check-isolation check-tap check-fuzz

# README's Layout is the contract of the source tree's layers: checked on the
# built objects (which file references which file's symbols), with the
# sources and fuzz harnesses for the functions called by name.
check-layers: $(OBJS)
	perl $(srcdir)/test/layers.pl $(srcdir)/README.md $(OBJS) -- \
	  $(wildcard $(srcdir)/src/*.c) $(wildcard $(srcdir)/test/fuzz/*.c)

# lake's suites need their own server settings (shared_preload_libraries,
# test/conf/*.conf), so they never run against a server already up: after
# `make install`, installcheck runs the regress and isolation suites on
# temporary servers of the installed PostgreSQL with the installed lake.
installcheck: check-regress check-isolation

# REGRESS_CONF: the server settings (test/cassert/run.sh adds
# debug_discard_caches to them, and runs them apart, in REGRESS_OUT).
# REGRESS_OUT: where results/, log/ and regression.diffs go.
REGRESS_CONF ?= test/conf/regress.conf
REGRESS_OUT  ?= .
check-regress:
	mkdir -p tmp_check $(REGRESS_OUT)
	$(PGXS_DIR)../../src/test/regress/pg_regress --bindir=$(BINDIR) \
	  --inputdir=test --outputdir=$(REGRESS_OUT) --temp-instance=tmp_check/regress \
	  --temp-config=$(REGRESS_CONF) --dbname=contrib_regression \
	  $(REGRESS_T)

check-isolation:
	test/run-isolation $(PGXS_DIR)../../src/test/isolation/pg_isolation_regress $(BINDIR)

# PROVE_TESTS: a subset of test/t (test/cassert/run.sh leaves the router's
# out where PL/Proxy is missing).
PROVE_TESTS ?= test/t/*.pl
check-tap:
	rm -rf tmp_check/tap tmp_check/t_* tmp_check/log && mkdir -p tmp_check
	PATH="$(BINDIR):$$PATH" PG_REGRESS=$(PGXS_DIR)../../src/test/regress/pg_regress \
	  TESTDIR=$(CURDIR) PG_TEST_EXTRA="$(PG_TEST_EXTRA)" \
	  prove -I $(PGXS_DIR)../../src/test/perl -I test/t $(PROVE_FLAGS) $(PROVE_TESTS)

# The decoders of stored bytes under libFuzzer with ASan and UBSan: a short
# budget per harness in every check, FUZZ_SECONDS each with `make fuzz`
# (which also writes bench/results-fuzz.md for bench/RESULTS.md).
FUZZ_SECONDS ?= 600
check-fuzz:
	PG_CONFIG=$(PG_CONFIG) test/fuzz/run.sh 20

fuzz:
	PG_CONFIG=$(PG_CONFIG) test/fuzz/run.sh $(FUZZ_SECONDS) bench/results-fuzz.md

check-valgrind:
	PG_CONFIG=$(PG_CONFIG) test/valgrind/run.sh

# Every benchmark, each beside its baseline from the same run; the
# foundation's report (run.sh) comes first, the others' sections follow.
bench:
	bench/run.sh
	bench/staged.sh
	bench/cycles.sh
	bench/recovery.sh
	bench/router.sh
	cat bench/results-staged.md bench/results-cycles.md bench/results-recovery.md bench/results-router.md \
	  $(wildcard bench/results-fuzz.md) >> bench/RESULTS.md
