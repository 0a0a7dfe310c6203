# sunmao — build, test, bench, install. Everything is discovered from the tree:
#   instances/<name>.c  -> $(BUILD)/lib<name>.so (malloc_socket, drop-in) and
#                          $(BUILD)/libsm_<name>.a (custom_socket, prefixed sm_<name>_*)
#   tests/unit/<t>.c    -> $(BUILD)/tests/unit/<t>      (per-layer unit tests, fake next layer)
#   tests/api/<t>.c|.cc -> $(BUILD)/tests/api/<t>       (plain programs, run per instance by scripts)
#   tests/*/*.sh        -> run by tests/run.sh with BUILD and INSTANCES in the environment
CC      ?= gcc
CXX     ?= g++
BUILD   ?= build
PREFIX  ?= /usr/local
OPT     ?= -O2
WERROR  ?=
SAN     ?=
# 1 when `make` installs what it needs itself (CI and fresh machines); 0 to skip apt-get.
AUTO_DEPS ?= 1

WARN     := -Wall -Wextra $(if $(WERROR),-Werror)
# x86-64: no jump may cross or end on a 32-byte boundary. Intel CPUs since Skylake keep such jumps
# out of the decoded-instruction cache (the JCC erratum microcode update), and where the fast path's
# jumps fell was luck of the build: the same malloc+free code took 7.9 or 7.4 ns per pair depending
# on unrelated changes elsewhere in the library; with this flag 7.4 (docs/default-allocator.md).
comma := ,
BRANCH_ALIGN := $(if $(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null)),$(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),-mbranches-within-32B-boundaries,-Wa$(comma)-mbranches-within-32B-boundaries))
CPPFLAGS += -Iinclude -D_GNU_SOURCE
CFLAGS   += -std=c11 $(OPT) -g $(WARN) -fPIC -fvisibility=hidden $(BRANCH_ALIGN) $(SAN)
CXXFLAGS += -std=c++17 $(OPT) -g $(WARN) -fPIC -fvisibility=hidden $(SAN)
LDLIBS   += -lpthread

INSTANCE_SRCS := $(wildcard instances/*.c)
# An instance may include another as its base (instances/wfslabs.c: wfslab + tail_chksum).
INSTANCES  := $(sort $(basename $(notdir $(INSTANCE_SRCS))))
HEADERS    := $(shell find include -name '*.h')
SHARED_LIBS:= $(INSTANCES:%=$(BUILD)/lib%.so)
STATIC_LIBS:= $(INSTANCES:%=$(BUILD)/libsm_%.a)
UNIT_SRCS  := $(wildcard tests/unit/*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
API_CSRCS  := $(wildcard tests/api/*.c tests/stress/*.c tests/programs/*.c tests/security/*.c)
API_CXXSRCS:= $(wildcard tests/api/*.cc)
API_BINS   := $(API_CSRCS:tests/%.c=$(BUILD)/tests/%) $(API_CXXSRCS:tests/%.cc=$(BUILD)/tests/%)
TEST_SUPPORT := $(wildcard tests/support/*.h)
# The wcet_stat meter for any allocator (bench/lib/wcetstat.c, bench/README.md): not an instance.
WCETSTAT   := $(BUILD)/bench/libwcetstat.so
# smc, the model-language compiler (docs/model-language.md), and its catalogue, generated from the
# headers' @model lines and options (tools/smc/catalogue.sh).
SMC        := $(BUILD)/smc
SMC_SRCS   := $(wildcard tools/smc/*.c)
SMC_CATALOGUE := $(BUILD)/smc-gen/catalogue.c

.PHONY: all libs static-libs tests test bench install uninstall clean deps check-headers check-layering stress fuzz help tools unit-tests deb
all: libs tests $(WCETSTAT) $(SMC)

libs: $(SHARED_LIBS) $(STATIC_LIBS)
static-libs: $(STATIC_LIBS)
.SECONDARY:
tests: $(UNIT_BINS) $(API_BINS)

# The drop-in library: the instance composed over malloc_socket, plus the C++ operator shim.
$(BUILD)/obj/%.o: instances/%.c $(HEADERS) $(INSTANCE_SRCS) | $(BUILD)/obj
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
# The C++ runtime's exception personality is referenced weakly (see the comment in the source):
# the drop-in library must load into C programs without libstdc++.
$(BUILD)/obj/new_delete.o: src/cxx/new_delete.cc | $(BUILD)/obj
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@
	objcopy --weaken-symbol=__gxx_personality_v0 --weaken-symbol=__cxa_begin_catch \
	    --weaken-symbol=__cxa_end_catch --weaken-symbol=_ZSt9terminatev $@
# Named lib<name>.so here (tests and benchmarks preload it from $(BUILD)), with the soname
# lib<name>.so.MAJOR that make install gives it; the link flags' stamp relinks after a change.
$(BUILD)/lib%.so: $(BUILD)/obj/%.o $(BUILD)/obj/new_delete.o
	$(CC) -shared $(SAN) -static-libgcc -Wl,-soname,lib$*.so.$(SOVERSION) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS) -ldl

# The prefixed library: the same composition over custom_socket (sm_<name>_malloc, ...).
$(BUILD)/obj/sm_%.o: instances/%.c $(HEADERS) $(INSTANCE_SRCS) | $(BUILD)/obj
	$(CC) $(CPPFLAGS) -DSM_PREFIX=sm_$(subst -,_,$*)_ $(CFLAGS) -c $< -o $@
$(BUILD)/libsm_%.a: $(BUILD)/obj/sm_%.o
	rm -f $@ && ar rcs $@ $^

# malloc_heap(the next malloc in the process)::wcet_stat::malloc_socket, with the C++ operators:
# LD_PRELOAD=libwcetstat.so:libX.so times allocator X.
$(BUILD)/obj/bench_wcetstat.o: bench/lib/wcetstat.c $(HEADERS) | $(BUILD)/obj
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
$(WCETSTAT): $(BUILD)/obj/bench_wcetstat.o $(BUILD)/obj/new_delete.o
	@mkdir -p $(@D)
	$(CC) -shared $(SAN) -static-libgcc -o $@ $^ $(LDLIBS) -ldl

$(SMC_CATALOGUE): tools/smc/catalogue.sh tools/options-table.sh $(HEADERS) $(INSTANCE_SRCS)
	@mkdir -p $(@D)
	tools/smc/catalogue.sh -o $@
# smc finds the headers beside itself (BUILD/../include, or PREFIX/bin/../include installed), else
# in INCLUDEDIR as configured here.
$(SMC): $(SMC_SRCS) $(wildcard tools/smc/*.h) $(SMC_CATALOGUE)
	$(CC) $(CPPFLAGS) -Itools/smc $(CFLAGS) -DSMC_VERSION='"$(VERSION)"' -DSMC_INCLUDEDIR='"$(INCLUDEDIR)"' -DSMC_DATADIR='"$(DATADIR)"' \
	    $(SMC_SRCS) $(SMC_CATALOGUE) -o $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(HEADERS) $(TEST_SUPPORT)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -I. $(CFLAGS) $< -o $@ $(LDLIBS)
$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -I. $(CFLAGS) $< -o $@ $(LDLIBS) -ldl
$(BUILD)/tests/%: tests/%.cc $(TEST_SUPPORT)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) -I. $(CXXFLAGS) $< -o $@ $(LDLIBS) -ldl

$(BUILD)/obj:
	mkdir -p $@

deps:
	@AUTO_DEPS=$(AUTO_DEPS) tools/ensure-deps.sh build

# The README's test command: builds (going on past failures, so the summary still counts them),
# then runs every test; the last line is the summary, also when a test fails. make itself would
# print "make: *** [Makefile:NN: test] Error 1" after it: instead, the recipe stops make with
# SIGPIPE, which make does not catch and shells do not report, so make exits with status 141 and
# says nothing. Not where make has to go on (-k, -i, goals other than test), buffers the recipe's
# output (--output-sync: the output would be lost) or is a sub-make (its parent reports the failure
# anyway): there the recipe just fails.
MAKE_LETTERS = $(firstword -$(MAKEFLAGS))
TEST_STOPS_MAKE = $(if $(filter 0,$(MAKELEVEL)),$(if $(filter-out test,$(MAKECMDGOALS))$(findstring k,$(MAKE_LETTERS))$(findstring \
	i,$(MAKE_LETTERS))$(filter-out -Onone,$(filter -O%,$(MAKEFLAGS))),,1))
test: deps
	@mkdir -p $(BUILD); echo "building (log: $(BUILD)/build.log)"; \
	$(MAKE) --no-print-directory -k all >$(BUILD)/build.log 2>&1; \
	BUILD_RC=$$? BUILD=$(BUILD) INSTANCES="$(INSTANCES)" tests/run.sh; rc=$$?; \
	if [ $$rc -ne 0 ] && [ "$(TEST_STOPS_MAKE)" = 1 ]; then \
	    case "$$(cat /proc/$$PPID/comm 2>/dev/null)" in *make*) kill -PIPE $$PPID ;; esac; \
	fi; exit $$rc

# `make help`: the targets and variables. Keep it in step with the rules.
help:
	@printf '%s\n' \
	'usage: make [TARGET...] [VARIABLE=value...]' \
	'' \
	'Targets:' \
	'  all             libraries, test programs and the wcet_stat meter (the default target)' \
	'  libs            $(BUILD)/libNAME.so (drop-in malloc) and libsm_NAME.a (prefixed API) per instances/NAME.c' \
	'  static-libs     only the libsm_NAME.a' \
	'  tests           the unit and API test programs' \
	'  test            build (going on past errors), then run every test (tests/run.sh --help);' \
	'                  the last line is "N passed, N failed[, N skipped]", the status non-zero on a failure' \
	'  bench           build, install the peer allocators if missing, run the comparison and write' \
	'                  bench/results/DATE.md (bench/README.md, bench/run.sh --help)' \
	'  install         libraries, headers, pkg-config and CMake files, man page, sunmao-run and the' \
	'                  wcet_stat meter into $(DESTDIR)$(PREFIX) (docs/install.md)' \
	'  tools           the wcet_stat meter ($(BUILD)/bench/libwcetstat.so) and smc, the model-language' \
	'                  compiler ($(BUILD)/smc; docs/model-language.md)' \
	'  unit-tests      only the per-layer unit test programs' \
	'  uninstall       remove what install put there' \
	'  deb             build Debian packages (debian/)' \
	'  stress          the long stress tier: every instance, new seeds, STRESS_MINUTES (tools/stress-long.sh)' \
	'  fuzz            the differential fuzzer, FUZZ_SECONDS per instance, then smc'"'"'s parser for FUZZ_SECONDS;' \
	'                  new coverage merged into the corpora (tests/fuzz/corpus, tests/smc/corpus)' \
	'  deps            install the Debian packages the build needs, if missing (tools/ensure-deps.sh)' \
	'  check-headers   every public header compiles on its own (tools/check-headers.sh)' \
	'  check-layering  the include graph is one-way (tools/check-layering.sh)' \
	'  clean           remove $(BUILD)/' \
	'  help            this text' \
	'' \
	'Variables (now):' \
	'  CC, CXX         compilers ($(CC), $(CXX))' \
	'  BUILD           build directory ($(BUILD))' \
	'  OPT             optimisation flags ($(OPT))' \
	'  WERROR=1        warnings are errors' \
	'  SAN=FLAGS       sanitizer flags for the build, e.g. SAN=-fsanitize=address,undefined' \
	'  AUTO_DEPS=0     never run apt-get, only report missing packages (now $(AUTO_DEPS))' \
	'  PREFIX          install prefix ($(PREFIX))' \
	'  LIBDIR          where install puts the libraries ($(LIBDIR))' \
	'  INCLUDEDIR, DATADIR, MANDIR, PKGCONFIGDIR, CMAKEDIR, BINDIR  the other install directories' \
	'  DESTDIR         staging root prepended to every install path (packages)' \
	'  TEST_FILTER=RE  make test: only the tests whose name matches, e.g. TEST_FILTER=build/headers' \
	'  QUICK=1         make bench: one round, small parameters (about 3 min)' \
	'  BENCH=LIST      make bench: workloads or groups, e.g. BENCH=larson,redis' \
	'  ALLOCS=LIST     make bench: allocators, e.g. ALLOCS=glibc,mimalloc,sunmao' \
	'  BASELINE, ROUNDS, TIMEOUT  make bench: see bench/run.sh --help' \
	'  STRESS_MINUTES  make stress: how long ($(STRESS_MINUTES))' \
	'  FUZZ_SECONDS    make fuzz: per instance, and for smc ($(FUZZ_SECONDS))'

check-headers:
	@tools/check-headers.sh
check-layering:
	@tools/check-layering.sh

bench: deps libs $(WCETSTAT)
	@AUTO_DEPS=$(AUTO_DEPS) tools/ensure-deps.sh bench
	@BUILD=$(BUILD) INSTANCES="$(INSTANCES)" bench/run.sh

# The long tiers of the reliability suite (docs/reliability.md): make test runs each briefly.
STRESS_MINUTES ?= 10
FUZZ_SECONDS   ?= 600
stress: deps all
	@BUILD=$(BUILD) INSTANCES="$(INSTANCES)" tools/stress-long.sh $(STRESS_MINUTES)
fuzz: deps $(SMC)
	@BUILD=$(BUILD) INSTANCES="$(INSTANCES)" FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_MERGE=1 tests/fuzz/fuzz.sh
	@BUILD=$(BUILD) SMC_FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_MERGE=1 tests/smc/fuzz.sh

# ---- make install / make uninstall (docs/install.md) ----
# The version, written once in include/sunmao/core/version.h: the installed libraries are
# lib<name>.so.$(VERSION) with the soname lib<name>.so.$(SOVERSION).
version_number = $(shell sed -n 's/^.define SUNMAO_VERSION_$(1)  *\([0-9][0-9]*\).*/\1/p' include/sunmao/core/version.h)
VERSION_MAJOR := $(call version_number,MAJOR)
VERSION_MINOR := $(call version_number,MINOR)
VERSION_PATCH := $(call version_number,PATCH)
VERSION       := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SOVERSION     := $(VERSION_MAJOR)
# Where install puts things (each under $(DESTDIR) when set).
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
DATADIR      ?= $(PREFIX)/share
MANDIR       ?= $(DATADIR)/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/sunmao

# The shared libraries' link flags, in a file that changes only when they do: the libraries
# relink after a change (a new soname, LDFLAGS), as their objects have not changed.
$(SHARED_LIBS): $(BUILD)/obj/so-link-flags
$(BUILD)/obj/so-link-flags: FORCE | $(BUILD)/obj
	@echo 'soname lib*.so.$(SOVERSION) $(LDFLAGS)' | cmp -s - $@ || echo 'soname lib*.so.$(SOVERSION) $(LDFLAGS)' >$@
.PHONY: FORCE
FORCE:

# The static drop-in: the default instance's malloc_socket object (the one in libsunmao.so) and the
# C++ operator shim, for programs that link the allocator in (pkg-config sunmao-static, CMake
# sunmao::sunmao-static); the shim's member comes in with a C++ program's first operator new.
DROPIN_STATIC := $(if $(filter sunmao,$(INSTANCES)),$(BUILD)/libsunmao.a)
libs: $(DROPIN_STATIC)
$(BUILD)/libsunmao.a: $(BUILD)/obj/sunmao.o $(BUILD)/obj/new_delete.o
	rm -f $@ && ar rcs $@ $^

# The pkg-config and CMake files, written by install from src/pkg/*.in: pkg-config paths relative to ${prefix} where
# they lie under it (pkg-config --define-prefix), CMake paths relative to the CMake file's own
# directory (a staged or moved installation finds itself).
relpath = $(shell realpath -ms --relative-to='$(1)' '$(2)')
pc_path = $(if $(filter $(PREFIX)/%,$(1)),$${prefix}/$(patsubst $(PREFIX)/%,%,$(1)),$(1))
INSTALL_SUBST = -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' \
	-e 's|@VERSION_MINOR@|$(VERSION_MINOR)|g' -e 's|@SOVERSION@|$(SOVERSION)|g' -e 's|@PREFIX@|$(PREFIX)|g' \
	-e 's|@PC_LIBDIR@|$(call pc_path,$(LIBDIR))|g' -e 's|@PC_INCLUDEDIR@|$(call pc_path,$(INCLUDEDIR))|g' \
	-e 's|@CMAKE_TO_LIBDIR@|$(call relpath,$(CMAKEDIR),$(LIBDIR))|g' \
	-e 's|@CMAKE_TO_INCLUDEDIR@|$(call relpath,$(CMAKEDIR),$(INCLUDEDIR))|g' \
	-e 's|@CMAKE_TO_DATADIR@|$(call relpath,$(CMAKEDIR),$(DATADIR))|g' \
	-e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g'
SIZEOF_VOID_P = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P -x c - 2>/dev/null | tr -d ' ')
PKGCONFIG_FILES := sunmao.pc sunmao-static.pc
CMAKE_FILES     := sunmaoConfig.cmake sunmaoConfigVersion.cmake
HEADER_DIRS := $(sort $(patsubst include/%/,%,$(dir $(HEADERS))))
INSTALLED_HEADERS := $(HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%)

# The tools beside the libraries: sunmao-run (a program with an allocator preloaded) and the
# wcet_stat meter, which sunmao-tools packages.
BINDIR       ?= $(PREFIX)/bin
tools: $(WCETSTAT) $(SMC)
unit-tests: $(UNIT_BINS)

install: libs tools
	@case "$(VERSION)" in [0-9]*.[0-9]*.[0-9]*) ;; *) echo "make install: no version in include/sunmao/core/version.h" >&2; exit 1 ;; esac
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR) \
	    $(DESTDIR)$(DATADIR)/sunmao/instances $(DESTDIR)$(MANDIR)/man3 $(HEADER_DIRS:%=$(DESTDIR)$(INCLUDEDIR)/%)
	for n in $(INSTANCES); do \
	    install -m 755 $(BUILD)/lib$$n.so $(DESTDIR)$(LIBDIR)/lib$$n.so.$(VERSION) && \
	    ln -sf lib$$n.so.$(VERSION) $(DESTDIR)$(LIBDIR)/lib$$n.so.$(SOVERSION) && \
	    ln -sf lib$$n.so.$(VERSION) $(DESTDIR)$(LIBDIR)/lib$$n.so || exit 1; \
	done
	install -m 644 $(STATIC_LIBS) $(DROPIN_STATIC) $(DESTDIR)$(LIBDIR)/
	for d in $(HEADER_DIRS); do install -m 644 include/$$d/*.h $(DESTDIR)$(INCLUDEDIR)/$$d/ || exit 1; done
	for f in $(PKGCONFIG_FILES:%=$(PKGCONFIGDIR)/%) $(CMAKE_FILES:%=$(CMAKEDIR)/%); do \
	    sed $(INSTALL_SUBST) src/pkg/$${f##*/}.in >$(DESTDIR)$$f && chmod 644 $(DESTDIR)$$f || exit 1; \
	done
	install -m 644 src/cxx/new_delete.cc $(DESTDIR)$(DATADIR)/sunmao/
	install -m 644 $(INSTANCE_SRCS) $(DESTDIR)$(DATADIR)/sunmao/instances/
	install -m 644 docs/sunmao.3 $(DESTDIR)$(MANDIR)/man3/
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/sunmao
	sed 's|@LIBDIR@|$(LIBDIR)|' tools/sunmao-run.sh >$(DESTDIR)$(BINDIR)/sunmao-run && chmod 755 $(DESTDIR)$(BINDIR)/sunmao-run
	install -m 755 $(WCETSTAT) $(DESTDIR)$(LIBDIR)/sunmao/libwcetstat.so
	install -m 755 $(SMC) $(DESTDIR)$(BINDIR)/smc

# Removes what install put there, then the directories left empty: sunmao's own (the header tree,
# cmake/sunmao, share/sunmao) and the standard ones install may have made (man3, pkgconfig, lib,
# ...: each install directory and its parents up to $(PREFIX)), never $(PREFIX) itself and never
# a directory that still holds anything.
uninstall:
	rm -f $(foreach n,$(INSTANCES),$(DESTDIR)$(LIBDIR)/lib$(n).so $(DESTDIR)$(LIBDIR)/lib$(n).so.$(SOVERSION) \
	    $(DESTDIR)$(LIBDIR)/lib$(n).so.$(VERSION) $(DESTDIR)$(LIBDIR)/libsm_$(n).a) $(DESTDIR)$(LIBDIR)/libsunmao.a
	rm -f $(PKGCONFIG_FILES:%=$(DESTDIR)$(PKGCONFIGDIR)/%) $(CMAKE_FILES:%=$(DESTDIR)$(CMAKEDIR)/%) \
	    $(DESTDIR)$(DATADIR)/sunmao/new_delete.cc $(INSTANCE_SRCS:instances/%=$(DESTDIR)$(DATADIR)/sunmao/instances/%) \
	    $(DESTDIR)$(MANDIR)/man3/sunmao.3
	rm -f $(INSTALLED_HEADERS) $(DESTDIR)$(BINDIR)/sunmao-run $(DESTDIR)$(BINDIR)/smc $(DESTDIR)$(LIBDIR)/sunmao/libwcetstat.so
	@[ ! -d $(DESTDIR)$(LIBDIR)/sunmao ] || rmdir --ignore-fail-on-non-empty $(DESTDIR)$(LIBDIR)/sunmao
	@for d in $(DESTDIR)$(INCLUDEDIR)/sunmao $(DESTDIR)$(DATADIR)/sunmao $(DESTDIR)$(CMAKEDIR); do \
	    [ ! -d "$$d" ] || find "$$d" -depth -type d -empty -delete; \
	done
	@for d in $(BINDIR) $(MANDIR)/man3 $(PKGCONFIGDIR) $(patsubst %/,%,$(dir $(CMAKEDIR))) $(LIBDIR) $(INCLUDEDIR) $(DATADIR); do \
	    while [ -n "$$d" ] && [ "$$d" != "$(PREFIX)" ] && [ "$$d" != / ]; do \
	        [ ! -d "$(DESTDIR)$$d" ] || rmdir --ignore-fail-on-non-empty "$(DESTDIR)$$d"; \
	        case "$$d" in "$(PREFIX)"/*) d="$${d%/*}" ;; *) d= ;; esac; \
	    done; \
	done

# Debian packages libsunmao0, libsunmao-dev and sunmao-tools (debian/), built with
# dpkg-buildpackage from a copy of this tree in $(BUILD)/deb/src (it writes its results beside the
# tree it builds): the .deb files, .buildinfo and .changes land in $(BUILD)/deb.
deb:
	@AUTO_DEPS=$(AUTO_DEPS) tools/ensure-deps.sh deb
	@rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/src
	@tar --exclude=./$(BUILD) --exclude=./.git -cf - . | tar -xf - -C $(BUILD)/deb/src
	@echo "make deb: dpkg-buildpackage (log: $(BUILD)/deb/build.log)"
	@cd $(BUILD)/deb/src && dpkg-buildpackage -us -uc -b -j$(shell nproc 2>/dev/null || echo 2) >../build.log 2>&1 || \
	    { tail -20 ../build.log; echo "make deb: dpkg-buildpackage failed (log: $(BUILD)/deb/build.log)" >&2; exit 1; }
	@rm -rf $(BUILD)/deb/src
	@ls $(BUILD)/deb/*.deb

clean:
	rm -rf $(BUILD)
