/*
 * crash.c - attribute a crash inside plugin code to the plugin, pass, stage
 * and node that were running.
 *
 * The handler is async-signal-safe: it formats into a fixed buffer on its
 * (alternate) stack with hand-rolled copying and integer formatting, writes
 * it with one write(2), and re-raises.  It reads only the thread's current
 * activity record and the strings it points to, which stay valid while the
 * record is current: plugin and component names live in the loaded plugin,
 * file and stage names belong to the caller, and the graph and node names are
 * looked up in kiln__activity_enter (interned strings, which live as long as
 * the context).  It never reads the graph itself: the plugin that crashed may
 * have freed it.  Strings are copied at most a bounded length each.
 */
#include "crash.h"
#include "graph_int.h"
#include "ctx.h"
#include "fileio.h"
#include <signal.h>
#include <unistd.h>

/* initial-exec: a signal handler must not go through __tls_get_addr. */
static _Thread_local kiln_activity *current __attribute__((tls_model("initial-exec")));

kiln_activity *kiln__activity_enter(kiln_activity *a)
{
    kiln_activity *prev = current;
    if (a) {
        const kiln_graph *g = a->graph;
        a->graph_name = g ? kiln__intern_str(&g->ctx->strings, g->name) : NULL;
        a->node_name = g && a->node && a->node < g->node_limit
                           ? kiln__intern_str(&g->ctx->strings, g->cold[a->node].name)
                           : NULL;
    }
    current = a;
    return prev;
}

void kiln__activity_leave(kiln_activity *prev)
{
    current = prev;
}

/* The message under construction: a fixed buffer, never overflowed. */
typedef struct msgbuf {
    char b[2048];
    size_t n;
} msgbuf;

/* Append at most 400 bytes of @p s ("?" when NULL). */
static void add(msgbuf *m, const char *s)
{
    if (!s)
        s = "?";
    for (size_t i = 0; s[i] && i < 400 && m->n < sizeof(m->b) - 1; i++)
        m->b[m->n++] = s[i];
}

static void add_uint(msgbuf *m, unsigned long v)
{
    char buf[24];
    int i = (int)sizeof(buf) - 1;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    add(m, &buf[i]);
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
    const kiln_activity *a = current;
    msgbuf m;
    m.n = 0;
    add(&m, "kiln: fatal: ");
    add(&m, signame(sig));
    if (a) {
        add(&m, " in plugin ");
        if (a->plugin) {
            add(&m, a->plugin);
            if (a->file) {
                add(&m, " (");
                add(&m, a->file);
                add(&m, ")");
            }
        } else {
            add(&m, a->file ? a->file : "<built-in>");
        }
        if (a->doing) {
            add(&m, " while ");
            add(&m, a->doing);
            if (a->component) {
                add(&m, ", component ");
                add(&m, a->component);
            }
        } else {
            add(&m, ", pass ");
            add(&m, a->component);
        }
        add(&m, " (stage ");
        add(&m, a->stage);
        if (a->graph_name) {
            add(&m, ", graph ");
            add(&m, a->graph_name);
        }
        if (a->node_name) {
            add(&m, ", node ");
            add(&m, a->node_name);
            add(&m, " #");
            add_uint(&m, a->node);
        }
        add(&m, ")");
    } else {
        add(&m, " outside any plugin (kiln itself)");
    }
    m.b[m.n++] = '\n';
    for (size_t off = 0; off < m.n;) {
        ssize_t k = write(STDERR_FILENO, m.b + off, m.n - off);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
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
