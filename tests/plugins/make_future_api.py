#!/usr/bin/env python3
"""make_future_api.py SRC DEST - a copy of SRC/plugin-api as the next minor
release would ship it: KILN_ABI_MINOR raised by one and one new host function,
kiln_future_probe, appended to the host table by tools/gen_host_funcs.py.
Test plugins built against DEST/plugin-api probe for that function on the
current host (tests/core/test_plugin.c)."""
import os, re, shutil, subprocess, sys

src, dest = sys.argv[1], sys.argv[2]
api = os.path.join(dest, "plugin-api")
if os.path.exists(api):
    shutil.rmtree(api)
shutil.copytree(os.path.join(src, "plugin-api"), api)
plugin_h = os.path.join(api, "kiln", "kiln_plugin.h")
text = open(plugin_h).read()
text, n = re.subn(r"#define KILN_ABI_MINOR (\d+)",
                  lambda m: "#define KILN_ABI_MINOR %d" % (int(m.group(1)) + 1), text)
assert n == 1, "KILN_ABI_MINOR not found"
open(plugin_h, "w").write(text)
runtime_h = os.path.join(api, "kiln", "kiln_runtime.h")
text = open(runtime_h).read()
tail = "#ifdef __cplusplus\n}\n#endif\n#endif /* KILN_RUNTIME_H */"
assert tail in text, "kiln_runtime.h tail changed"
text = text.replace(tail, "/** Added in the next minor (test only). */\n"
                    "KILN_API int32_t kiln_future_probe(int32_t x);\n\n" + tail)
open(runtime_h, "w").write(text)
subprocess.check_call([sys.executable, os.path.join(src, "tools", "gen_host_funcs.py"),
                       "--root", dest], stdout=subprocess.DEVNULL)
