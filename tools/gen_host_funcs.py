#!/usr/bin/env python3
"""Generate plugin-api/kiln/kiln_host_funcs.h and kiln_ext.h from the KILN_API
prototypes of the public plugin headers, and guard the host table's ABI.

The host table (struct kiln_host_api) is APPEND ONLY: a plugin built against
older headers indexes it by offset.  The committed record plugin-api/host_table.abi
lists every entry as it was released: position, the ABI minor that added it,
name, return type and parameter types.  The generator refuses (exit 1, one
line per problem) when

  - an entry of the record is no longer declared (removed or renamed);
  - an entry's return or parameter types differ from the record (a changed
    signature breaks every plugin that calls it: add a new function instead);
  - new functions were declared but KILN_ABI_MINOR (kiln_plugin.h) was not
    raised above the newest minor in the record.

New functions are appended in header order with the current KILN_ABI_MINOR as
their "since" minor, and the record is rewritten.  A change of KILN_ABI_MAJOR
starts a new record (a major release may break anything).  Parameter names are
not part of the ABI and may change freely.

Functions declared between `#ifdef KILN_EXPERIMENTAL` and its `#endif` are
table entries like the others (their slot is ABI), but kiln_ext.h maps them
only when KILN_EXPERIMENTAL is defined.

  gen_host_funcs.py            regenerate (writes the headers and the record)
  gen_host_funcs.py --check    fail when anything is stale (the test suite)
  --root DIR                   operate on DIR/plugin-api instead of this tree
"""
import os
import re
import sys

HEADERS = ["kiln_status.h", "kiln_graph.h", "kiln_analysis.h", "kiln_pass.h",
           "kiln_component.h", "kiln_alloc_api.h", "kiln_plugin.h", "kiln_runtime.h", "kiln_op.h"]
# Functions that are deliberately not reachable through the table.
EXCLUDE = set()
C_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed",
                "unsigned", "const", "volatile", "struct", "enum", "union", "_Bool", "bool"}


def fail(problems):
    for p in problems:
        sys.stderr.write("gen_host_funcs: %s\n" % p)
    sys.exit(1)


def strip_name(param):
    """Type of one parameter: drop a trailing parameter name, if any."""
    param = " ".join(param.split())
    if param in ("...", "void"):
        return param
    m = re.match(r"^(.*?[\s*])([A-Za-z_]\w*)$", param)
    if m and m.group(2) not in C_TYPE_WORDS and m.group(1).strip():
        param = m.group(1)
    t = re.sub(r"\s*\*\s*", "*", param.strip())
    return re.sub(r"\s+", " ", t)


def signature(ret, params):
    types = [strip_name(p) for p in params.split(",")] if params.strip() else ["void"]
    return re.sub(r"\s*\*\s*", "*", " ".join(ret.split())), ", ".join(types)


def prototypes(api):
    out = []
    for h in HEADERS:
        text = open(os.path.join(api, h)).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        # experimental regions: #ifdef KILN_EXPERIMENTAL ... matching #endif
        spans, depth, start = [], 0, None
        for m in re.finditer(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b(.*)$", text, flags=re.M):
            kw, rest = m.group(1), m.group(2)
            if kw.startswith("if"):
                if start is None and kw == "ifdef" and rest.strip() == "KILN_EXPERIMENTAL":
                    start, depth = m.start(), 0
                elif start is not None:
                    depth += 1
            elif start is not None:
                if depth == 0:
                    spans.append((start, m.end()))
                    start = None
                else:
                    depth -= 1
        for m in re.finditer(r"^KILN_API\s+(.*?);", text, flags=re.S | re.M):
            decl = " ".join(m.group(1).split())
            decl = re.sub(r"\s*KILN_PRINTF\([^)]*\)\s*$", "", decl)
            fm = re.match(r"^(.*?)\b(kiln_\w+)\s*\((.*)\)$", decl)
            if not fm:
                fail(["cannot parse: " + decl])
            ret, name, params = fm.group(1).strip(), fm.group(2), fm.group(3)
            exp = any(a <= m.start() < b for a, b in spans)
            if name not in EXCLUDE:
                out.append((ret, name, params, exp))
    return out


def abi_version(api):
    text = open(os.path.join(api, "kiln_plugin.h")).read()
    major = re.search(r"#define\s+KILN_ABI_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+KILN_ABI_MINOR\s+(\d+)", text)
    if not major or not minor:
        fail(["kiln_plugin.h does not define KILN_ABI_MAJOR and KILN_ABI_MINOR"])
    return int(major.group(1)), int(minor.group(1))


def read_record(path):
    """[(name, since, ret, params)] in table order, and the record's major."""
    if not os.path.exists(path):
        return None, []
    major, rows = None, []
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        if line.startswith("major "):
            major = int(line.split()[1])
            continue
        f = line.split("\t")
        if len(f) != 5:
            fail(["%s: malformed line: %s" % (path, line)])
        rows.append((f[2], int(f[1]), f[3], f[4]))
    return major, rows


def render_record(major, rows):
    out = ["# host_table.abi - GENERATED by tools/gen_host_funcs.py; do not edit.",
           "#",
           "# The released layout of struct kiln_host_api: one entry per line,",
           "# position <TAB> since-minor <TAB> name <TAB> return type <TAB> parameter types.",
           "# The generator refuses removed entries, changed signatures and new entries",
           "# without a raised KILN_ABI_MINOR.",
           "major %d" % major]
    for i, (name, since, ret, params) in enumerate(rows):
        out.append("%d\t%d\t%s\t%s\t%s" % (i, since, name, ret, params))
    return "\n".join(out) + "\n"


def member(name):
    return name[len("kiln_"):]


def main():
    args = sys.argv[1:]
    check = "--check" in args
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--root" in args:
        root = os.path.abspath(args[args.index("--root") + 1])
    api = os.path.join(root, "plugin-api", "kiln")
    record_path = os.path.join(root, "plugin-api", "host_table.abi")
    major, minor = abi_version(api)
    protos = prototypes(api)
    by_name = {p[1]: p for p in protos}
    rec_major, rows = read_record(record_path)
    if rec_major is None:
        # No record yet: adopt the committed table's order as released.
        old = os.path.join(api, "kiln_host_funcs.h")
        names = re.findall(r"X\([^,]+,\s*(kiln_\w+),", open(old).read()) if os.path.exists(old) else []
        rec_major = major
        rows = [(n, minor) + (signature(by_name[n][0], by_name[n][2]) if n in by_name else ("?", "?"))
                for n in names]
    if rec_major is not None and rec_major != major:
        rows = []  # a new major starts a new table
    problems = []
    order = []
    for name, since, ret, params in rows:
        if name not in by_name:
            problems.append("host table entry %s (since 1.%d) was removed: an ABI break "
                            "(keep it declared; deprecate instead)" % (name, since))
            continue
        now = signature(by_name[name][0], by_name[name][2])
        if now != (ret, params):
            problems.append("host table entry %s changed signature: was %s(%s), now %s(%s): "
                            "an ABI break (keep it; add a new function instead)"
                            % (name, ret, params, now[0], now[1]))
        order.append((name, since))
    newest = max([s for _, s, _, _ in rows], default=-1)
    known = {n for n, _ in order}
    added = [p[1] for p in protos if p[1] not in known]
    if added and rows and minor <= newest:
        problems.append("new host functions %s need KILN_ABI_MINOR raised to %d in "
                        "kiln_plugin.h (it is %d)" % (", ".join(added), newest + 1, minor))
    if problems:
        fail(problems)
    order += [(n, minor) for n in added]
    new_rows = [(n, s) + signature(by_name[n][0], by_name[n][2]) for n, s in order]

    lines = ["/*", " * kiln_host_funcs.h - GENERATED by tools/gen_host_funcs.py; do not edit.",
             " *",
             " * X(return type, name, member, (parameters)) for every host function a",
             " * plugin can call, in host-table order; `member` is the kiln_host_api field",
             " * (the name without its kiln_ prefix: plugins' kiln_* names are macros).",
             " * APPEND ONLY: the position of an entry is its offset in kiln_host_api,",
             " * part of the ABI (plugin-api/host_table.abi records it).",
             " */",
             "#ifndef KILN_HOST_FUNCS_H", "#define KILN_HOST_FUNCS_H", "",
             "#define KILN_HOST_FUNCS(X) \\"]
    for i, (n, _) in enumerate(order):
        ret, name, params, _exp = by_name[n]
        lines.append("    X(%s, %s, %s, (%s))%s" % (ret, name, member(name), params,
                                                     " \\" if i + 1 < len(order) else ""))
    lines += ["", "/* KILN_HOST_HAS(h, kiln_x) reads member KILN__HOST_MEMBER_kiln_x. */"]
    for n, _ in order:
        lines.append("#define KILN__HOST_MEMBER_%s %s" % (n, member(n)))
    lines += ["", "#endif /* KILN_HOST_FUNCS_H */", ""]
    funcs = "\n".join(lines)

    ext = ["/*", " * kiln_ext.h - GENERATED by tools/gen_host_funcs.py; do not edit.", " *",
           " * Included by the public headers when KILN_PLUGIN is defined: maps every",
           " * kiln_* host function onto the host table, so plugin sources call the",
           " * ordinary names and link against nothing.  KILN_PLUGIN_DEFINE (once per",
           " * plugin) defines the table pointer and the entry point.", " */",
           "#ifndef KILN_EXT_H", "#define KILN_EXT_H", "", '#include "kiln_plugin.h"', "",
           "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
           "extern const kiln_host_api *kiln__host KILN_PLUGIN_HIDDEN;", "",
           "#ifdef __cplusplus", "}", "#endif", ""]
    for n, _ in order:
        if not by_name[n][3]:
            ext.append("#define %s (kiln__host->%s)" % (n, member(n)))
    exp = [n for n, _ in order if by_name[n][3]]
    if exp:
        ext += ["", "#ifdef KILN_EXPERIMENTAL"]
        ext += ["#define %s (kiln__host->%s)" % (n, member(n)) for n in exp]
        ext += ["#endif"]
    ext += ["",
            "#ifndef KILN_BUILD_INFO",
            "#if defined(__clang__)",
            '#define KILN_BUILD_INFO "clang " __clang_version__',
            "#elif defined(__GNUC__)",
            '#define KILN_BUILD_INFO "gcc " __VERSION__',
            "#else",
            '#define KILN_BUILD_INFO "unknown compiler"',
            "#endif",
            "#endif",
            "",
            "/**",
            " * Define the plugin: its descriptor, the host-table pointer and the one",
            " * exported entry point.  @p init_ registers the components; @p fini_ may be NULL.",
            " * The descriptor declares KILN_ABI_MINOR_REQUIRED (default: the headers'",
            " * KILN_ABI_MINOR); a host older than that refuses the plugin, and so does",
            " * the init wrapper below on hosts that predate that check.",
            " */",
            "#define KILN_PLUGIN_DEFINE(name_, version_, license_, description_, init_, fini_)     \\",
            "    KILN_PLUGIN_HIDDEN const kiln_host_api *kiln__host;                                 \\",
            "    static kiln_status kiln__plugin_init(const kiln_host_api *h, kiln_registrar *r,    \\",
            "                                         kiln_error *e)                               \\",
            "    {                                                                                  \\",
            "        if (h == NULL || h->abi_major != KILN_ABI_MAJOR)                               \\",
            "            return KILN_ERR_VERSION;                                                   \\",
            "        if (h->abi_minor < KILN_ABI_MINOR_REQUIRED)                                    \\",
            "            return h->errorf(e, KILN_ERR_VERSION,                                      \\",
            "                             \"plugin %s needs kiln ABI %d.%d, host is %u.%u\", name_,  \\",
            "                             KILN_ABI_MAJOR, KILN_ABI_MINOR_REQUIRED,                  \\",
            "                             (unsigned)h->abi_major, (unsigned)h->abi_minor);          \\",
            "        kiln__host = h;                                                                \\",
            "        return init_(h, r, e);                                                         \\",
            "    }                                                                                  \\",
            "    static const kiln_plugin_desc kiln__plugin_desc = {                               \\",
            "        sizeof(kiln_plugin_desc), KILN_ABI_MAJOR, KILN_ABI_MINOR_REQUIRED, name_,      \\",
            "        version_, license_, description_, KILN_BUILD_INFO, kiln__plugin_init, fini_,   \\",
            "        {0}};                                                                          \\",
            "    KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);                \\",
            "    KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void)                 \\",
            "    {                                                                                  \\",
            "        return &kiln__plugin_desc;                                                     \\",
            "    }",
            "",
            "#endif /* KILN_EXT_H */", ""]
    ext = "\n".join(ext)
    targets = {os.path.join(api, "kiln_host_funcs.h"): funcs,
               os.path.join(api, "kiln_ext.h"): ext,
               record_path: render_record(major, new_rows)}
    stale = [p for p, c in targets.items() if not os.path.exists(p) or open(p).read() != c]
    if check:
        if stale:
            fail(["stale (run tools/gen_host_funcs.py): " + ", ".join(stale)])
        print("host table up to date: %d functions, ABI %d.%d" % (len(order), major, minor))
        return
    for p in stale:
        with open(p, "w") as f:
            f.write(targets[p])
    print("%d functions (%d new); wrote %d file(s)" % (len(order), len(added), len(stale)))


main()
