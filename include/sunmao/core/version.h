/* The version of sunmao, written here and nowhere else: the Makefile reads the three numbers below
 * for the installed libraries' names (lib<name>.so.MAJOR.MINOR.PATCH, soname lib<name>.so.MAJOR),
 * sunmao.pc and the CMake package's version, and tests/build/install.sh checks that they agree.
 * The soname's number is MAJOR: a release that changes what the drop-in libraries export, or the
 * meaning of a layer's options, raises it. Framework core; installed as <sunmao/core/version.h>. */
#ifndef SUNMAO_CORE_VERSION_H
#define SUNMAO_CORE_VERSION_H

#define SUNMAO_VERSION_MAJOR 0
#define SUNMAO_VERSION_MINOR 1
#define SUNMAO_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH", a string literal made from the numbers above. */
#define SUNMAO_VERSION_STR_(x) #x
#define SUNMAO_VERSION_STR(x)  SUNMAO_VERSION_STR_(x)
#define SUNMAO_VERSION_STRING                                                                        \
    SUNMAO_VERSION_STR(SUNMAO_VERSION_MAJOR) "." SUNMAO_VERSION_STR(SUNMAO_VERSION_MINOR) "."           \
        SUNMAO_VERSION_STR(SUNMAO_VERSION_PATCH)

/* One number that compares as the version does: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define SUNMAO_VERSION (SUNMAO_VERSION_MAJOR * 10000 + SUNMAO_VERSION_MINOR * 100 + SUNMAO_VERSION_PATCH)

#endif
