/* The checks of the C ABI's test programs (crates/cli/tests/capi.rs runs
 * them): every check is counted, and the first that fails exits non-zero
 * naming the rank, the line and the library's last error. A program sets
 * `rank` and `size` once it has joined its world. */
#ifndef OUTBOARD_TEST_CHECK_H
#define OUTBOARD_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

static uint32_t rank, size;
static int checks;

#define CHECK(cond) do { checks++; if (!(cond)) { \
    fprintf(stderr, "rank %u: check failed at %s:%d: %s (last error: %s)\n", rank, __FILE__, __LINE__, #cond, outboard_last_error()); \
    exit(1); } } while (0)
#define OK(call) do { int rc_ = (call); checks++; if (rc_ != OUTBOARD_OK) { \
    fprintf(stderr, "rank %u: %s failed at line %d: %s: %s\n", rank, #call, __LINE__, outboard_strerror(rc_), outboard_last_error()); \
    exit(1); } } while (0)
/* A call that must fail with `code` and a message containing `text`. */
#define FAILS(call, code, text) do { int rc_ = (call); checks++; \
    if (rc_ != (code) || !strstr(outboard_last_error(), (text))) { \
    fprintf(stderr, "rank %u: %s at line %d returned %d (%s), not %d with \"%s\"\n", rank, #call, __LINE__, rc_, outboard_last_error(), code, text); \
    exit(1); } } while (0)

/* How many of the group's collectives (or application bypass events) ran
 * as `what`, from its record (outboard_group_taken); 0: none. */
static inline long taken(outboard_group *g, const char *what) {
    static char text[8192];
    OK(outboard_group_taken(g, text, sizeof text));
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (sp && strcmp(sp + 1, what) == 0) return atol(line);
    }
    return 0;
}

#endif
