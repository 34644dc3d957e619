/*
 * test_status.c - the error object: the first error's message is kept whole,
 * a long chain of context frames keeps its first (innermost) and last
 * (outermost) frames, and the format says how many were left out between.
 */
#include "kiln_test.h"
#include "base.h"
#include <stdio.h>
#include <string.h>

static char text[KILN_ERROR_TEXT_SIZE];

/* A 100-frame chain: frame i is pushed i-th (0 = innermost, "node n"; 99 =
 * outermost, "file f.json").  The innermost KILN_HEAD_FRAMES and outermost
 * KILN_TAIL_FRAMES print, outermost first, with the count of the others. */
static void test_status_long_chain_keeps_both_ends(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_errorf(&err, KILN_ERR_PARSE, "bad token"), KILN_ERR_PARSE);
    for (int i = 0; i < 100; i++) {
        if (i == 0)
            kiln_error_push(&err, "node n");
        else if (i == 98)
            kiln_error_push(&err, "pass PruneGraphPass");
        else if (i == 99)
            kiln_error_push(&err, "file f.json");
        else
            kiln_error_push(&err, "frame%d", i);
    }
    kiln_error_format(&err, text, sizeof(text));
    /* outermost first: file, pass, frames 97..92, the gap, frames 7..1, node, message */
    char want[1024];
    int n = snprintf(want, sizeof(want), "file f.json: pass PruneGraphPass: ");
    for (int i = 97; i >= 100 - KILN_TAIL_FRAMES; i--)
        n += snprintf(want + n, sizeof(want) - (size_t)n, "frame%d: ", i);
    n += snprintf(want + n, sizeof(want) - (size_t)n,
                  "[%d frames left out]: ", 100 - KILN_HEAD_FRAMES - KILN_TAIL_FRAMES);
    for (int i = KILN_HEAD_FRAMES - 1; i >= 1; i--)
        n += snprintf(want + n, sizeof(want) - (size_t)n, "frame%d: ", i);
    snprintf(want + n, sizeof(want) - (size_t)n, "node n: bad token");
    if (strcmp(text, want) != 0)
        fprintf(stderr, "\ngot  %s\nwant %s\n", text, want);
    CU_ASSERT_STRING_EQUAL(text, want);
    CU_ASSERT_EQUAL(kiln_error_code(&err), KILN_ERR_PARSE);
}

/* Short chains print every frame, with no gap marker. */
static void test_status_short_chains(void)
{
    for (int nframes = 0; nframes <= KILN_MAX_FRAMES + 1; nframes++) {
        kiln_error err;
        kiln_error_clear(&err);
        kiln_errorf(&err, KILN_ERR_INVALID, "why");
        char want[4096] = "";
        int n = 0;
        for (int i = 0; i < nframes; i++)
            kiln_error_push(&err, "f%d", i);
        for (int i = nframes - 1; i >= 0; i--) {
            if (nframes == KILN_MAX_FRAMES + 1 && i == KILN_HEAD_FRAMES) {
                n += snprintf(want + n, sizeof(want) - (size_t)n, "[1 frames left out]: ");
                continue;
            }
            n += snprintf(want + n, sizeof(want) - (size_t)n, "f%d: ", i);
        }
        snprintf(want + n, sizeof(want) - (size_t)n, "why");
        kiln_error_format(&err, text, sizeof(text));
        CU_ASSERT_STRING_EQUAL(text, want);
    }
}

/* A 2000-byte reason is kept whole, with its frames, and so is one of
 * KILN_MSG_SIZE - 1 bytes; a longer one says it was cut. */
static void test_status_whole_reason(void)
{
    static char reason[KILN_MSG_SIZE + 100];
    for (size_t i = 0; i < 2000; i++)
        reason[i] = (char)('a' + i % 26);
    reason[1999] = 'Z';
    reason[2000] = 0;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_errorf(&err, KILN_ERR_VERIFY, "%s", reason);
    kiln_error_push(&err, "pass P");
    kiln_error_push(&err, "file g.json");
    CU_ASSERT_EQUAL(strlen(kiln_error_message(&err)), 2000);
    CU_ASSERT_STRING_EQUAL(kiln_error_message(&err), reason);
    kiln_error_format(&err, text, sizeof(text));
    CU_ASSERT_EQUAL(strncmp(text, "file g.json: pass P: ", 21), 0);
    CU_ASSERT_STRING_EQUAL(text + 21, reason);

    memset(reason, 'x', KILN_MSG_SIZE - 1);
    reason[KILN_MSG_SIZE - 1] = 0;
    kiln_error_clear(&err);
    kiln_errorf(&err, KILN_ERR_VERIFY, "%s", reason);
    CU_ASSERT_EQUAL(strlen(kiln_error_message(&err)), KILN_MSG_SIZE - 1);
    CU_ASSERT_PTR_NULL(strstr(kiln_error_message(&err), "[message cut]"));

    memset(reason, 'y', KILN_MSG_SIZE + 50);
    reason[KILN_MSG_SIZE + 50] = 0;
    kiln_error_clear(&err);
    kiln_errorf(&err, KILN_ERR_VERIFY, "%s", reason);
    CU_ASSERT_EQUAL(strlen(kiln_error_message(&err)), KILN_MSG_SIZE - 1);
    const char *m = kiln_error_message(&err);
    CU_ASSERT_STRING_EQUAL(m + strlen(m) - 14, " [message cut]");
    /* a small output buffer truncates the text, never overflows */
    char small[16];
    kiln_error_format(&err, small, sizeof(small));
    CU_ASSERT_EQUAL(strlen(small), 15);
}

/* Later errors only count; the first one's message and frames stay. */
static void test_status_first_error_wins(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_errorf(&err, KILN_ERR_IO, "first");
    kiln_error_push(&err, "file a");
    CU_ASSERT_EQUAL(kiln_errorf(&err, KILN_ERR_PARSE, "second"), KILN_ERR_IO);
    kiln_error_format(&err, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "file a: first");
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_status_long_chain_keeps_both_ends", test_status_long_chain_keeps_both_ends},
        {"test_status_short_chains", test_status_short_chains},
        {"test_status_whole_reason", test_status_whole_reason},
        {"test_status_first_error_wins", test_status_first_error_wins},
        {NULL, NULL}};
    return kiln_test_run("status", cases);
}
