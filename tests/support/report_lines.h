/* Counting an allocator's reports in a child's captured stderr: the lines that contain any of the
 * words allocators use for an error they found (ours, glibc's, the peers'). Shared by the probe
 * programs of tests/security/. */
#ifndef SUNMAO_TEST_REPORT_LINES_H
#define SUNMAO_TEST_REPORT_LINES_H

#include <stddef.h>
#include <string.h>

static inline unsigned report_lines(const char *text, const char *const *words, size_t nwords)
{
    unsigned n = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        for (size_t w = 0; w < nwords; w++)
            if (memmem(line, len, words[w], strlen(words[w]))) {
                n++;
                break;
            }
        line += len + (end != NULL);
    }
    return n;
}

#endif
