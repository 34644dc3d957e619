/*
 * crash.c - attribute a crash inside plugin code to the plugin, pass, stage
 * and node that were running.  The handler only uses async-signal-safe calls:
 * write(2), and hand-rolled integer formatting.  Node names are read from the
 * graph's interned strings, which is a plain memory read (no allocation); if
 * the graph is corrupt the read itself may fault, which re-enters the default
 * action because SA_RESETHAND is set.
 */
#include "crash.h"
#include "graph_int.h"
#include "ctx.h"
#include "fileio.h"
#include <signal.h>
#include <unistd.h>

static _Thread_local kiln_activity *current;

kiln_activity *kiln__activity_enter(kiln_activity *a)
{
    kiln_activity *prev = current;
    current = a;
    return prev;
}

void kiln__activity_leave(kiln_activity *prev)
{
    current = prev;
}

static void put(const char *s)
{
    if (!s)
        s = "?";
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static void put_uint(unsigned long v)
{
    char buf[24];
    int i = (int)sizeof(buf) - 1;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    put(&buf[i]);
}

static const char *signame(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    }
    return "signal";
}

static void on_crash(int sig)
{
    kiln_activity *a = current;
    put("kiln: fatal: ");
    put(signame(sig));
    if (a) {
        put(" in plugin ");
        put(a->plugin ? a->plugin : "<built-in>");
        put(", pass ");
        put(a->component);
        put(" (stage ");
        put(a->stage);
        if (a->graph) {
            put(", graph ");
            put(kiln__intern_str(&a->graph->ctx->strings, a->graph->name));
        }
        if (a->node && a->graph && a->node < a->graph->node_limit) {
            put(", node ");
            put(kiln__intern_str(&a->graph->ctx->strings, a->graph->cold[a->node].name));
            put(" #");
            put_uint(a->node);
        }
        put(")");
    } else {
        put(" outside any plugin (kiln itself)");
    }
    put("\n");
    kiln__tmpfiles_unlink_all(); /* no temporary output outlives the process */
    signal(sig, SIG_DFL);
    raise(sig);
}

void kiln_crash_handlers_install(void)
{
    static int installed;
    if (installed)
        return;
    installed = 1;
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack), .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (unsigned i = 0; i < KILN_ARRAY_LEN(sigs); i++)
        sigaction(sigs[i], &sa, NULL);
}
