#!/usr/bin/env python3
"""doc_commands.py - run every shell command shown in README.md and docs/*.md.

Used by tests/e2e/doc_commands.sh (ctest e2e_doc_commands); docs/testing.md
describes the conventions.  In short:

* Only fenced blocks opened with exactly ```sh are commands.  Other fences
  (```, ```json, ...) show output, file contents or syntax and are not run.
* Each line is one command; a line ending in a backslash continues on the next
  one, and a here-document (<<EOF ... EOF) belongs to the command that opens it.
  Blank lines and lines that are only a comment are ignored.
* Every command must exit 0, unless its trailing comment holds
  `# expect: exit N`, in which case it must exit exactly N.
* The blocks of one document run in order, each in its own bash (with
  `set -o pipefail`), all in one scratch directory per document.  The scratch
  directory holds copies of examples/, manifests/, tests/, tools/, sdk/,
  docs/, cmake/ and plugin-api/, and `build` is a symbolic link to the build
  tree under test, so both `kiln ...` (the build's bin/ is first on PATH) and
  `build/bin/kiln ...` work.  KILN_PLUGIN_PATH is unset.
* A block that runs tools/fetch-models.sh needs the real models: when that
  script cannot provide them, the block is reported SKIPPED and the test exits
  77 at the end (after running everything else), never 0.
* Commands that cannot run here are listed in SKIP below, each with its
  reason.  An entry that matches no command is itself an error, so the list
  never outlives the docs.

usage: doc_commands.py SOURCE_DIR BUILD_DIR [FILE.md ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# (document, regular expression searched in the command, reason).  Keep it small.
SKIP = [
    ("README.md", r"^make demo\b",
     "installs packages with apt-get and downloads the models; tools/demo.sh's steps run below"),
    ("README.md", r"^make test\b",
     "runs the whole suite, this test included, in three more builds"),
    ("docs/onnx.md", r"^make fuzz\b",
     "a 10-minute libFuzzer run in a clang build (make fuzz)"),
    ("docs/onnx.md", r"^build-fuzz/bin/onnx_run_fuzz\b",
     "replays a crash file that only a fuzzing run produces"),
]

# In the sanitizer build only (ASAN_OPTIONS set by ctest): a program linked
# against that build's libkiln needs the sanitizer runtime the commands do not
# ask for; the Debug and Release runs build and run it.
SKIP_SANITIZE = [
    ("docs/embedding.md", r"(^cc |sh -c|^\./app |^cmake --build embed-build|^embed-build/)",
     "links a program against the sanitizer build's libkiln"),
]
if os.environ.get("ASAN_OPTIONS"):
    SKIP += SKIP_SANITIZE

COPY_DIRS = ["examples", "manifests", "tests", "tools", "sdk", "docs", "cmake", "plugin-api"]
EXPECT_RE = re.compile(r"#.*\bexpect:\s*exit\s+(\d+)\b")
HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


class Command:
    def __init__(self, doc, line, text, expect):
        self.doc, self.line, self.text, self.expect = doc, line, text, expect
        self.skip = None


def blocks_of(path, rel):
    """Yield (first line number, [Command]) for each ```sh block of @p path."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            if lines[i].lstrip().startswith("```"):
                # skip any other fenced block whole, so a ```sh inside it is not seen
                j = i + 1
                while j < len(lines) and not lines[j].lstrip().startswith("```"):
                    j += 1
                i = j + 1
                continue
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise SystemExit("%s:%d: ```sh block is not closed" % (rel, i + 1))
        yield start, commands_of(rel, start, lines[start:j])
        i = j + 1


def commands_of(rel, first, body):
    cmds = []
    k = 0
    while k < len(body):
        line = body[k]
        lineno = first + k + 1
        k += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        text = line
        while text.endswith("\\") and k < len(body):
            text += "\n" + body[k]
            k += 1
        m = HEREDOC_RE.search(text)
        if m and "<<<" not in text:
            word = m.group(2)
            while k < len(body):
                text += "\n" + body[k]
                k += 1
                if body[k - 1].strip() == word:
                    break
            else:
                raise SystemExit("%s:%d: here-document %s is not closed" % (rel, lineno, word))
        first_line = text.split("\n", 1)[0]
        em = EXPECT_RE.search(first_line) or EXPECT_RE.search(text)
        cmds.append(Command(rel, lineno, text, int(em.group(1)) if em else 0))
    return cmds


def block_script(cmds):
    out = ["set -o pipefail", "__doc_fail=0"]
    for c in cmds:
        if c.skip:
            out.append("echo '== SKIP %s:%d (%s)'" % (c.doc, c.line, c.skip.replace("'", "")))
            continue
        out.append("echo '== %s:%d'" % (c.doc, c.line))
        out.append(c.text)
        out.append("__rc=$?")
        out.append("if [ \"$__rc\" -ne %d ]; then echo \"FAIL %s:%d: exit $__rc, expected %d\" >&2; "
                   "exit 1; fi" % (c.expect, c.doc, c.line, c.expect))
    return "\n".join(out) + "\n"


def prepare_scratch(root, src, build):
    os.makedirs(root)
    items = [os.path.join(src, d) for d in COPY_DIRS + ["README.md", "Makefile", "CMakeLists.txt"]
             if os.path.exists(os.path.join(src, d))]
    subprocess.run(["cp", "-R", "-P"] + items + [root], check=True)
    os.symlink(build, os.path.join(root, "build"))
    os.makedirs(os.path.join(root, ".tmp"))


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("usage: ")[1].strip(), file=sys.stderr)
        return 2
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    docs = sys.argv[3:] or (["README.md"] + sorted(
        "docs/" + f for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md")))
    kiln_bin = os.path.join(build, "bin")
    if not os.access(os.path.join(kiln_bin, "kiln"), os.X_OK):
        print("doc_commands: no kiln in %s" % kiln_bin, file=sys.stderr)
        return 1

    plan = []  # (doc, [(first line, [Command])])
    used = [0] * len(SKIP)
    for rel in docs:
        blocks = list(blocks_of(os.path.join(src, rel), rel))
        for _, cmds in blocks:
            for c in cmds:
                for n, (doc, pat, why) in enumerate(SKIP):
                    if doc == rel and re.search(pat, c.text):
                        c.skip = why
                        used[n] += 1
        plan.append((rel, blocks))
    stale = [SKIP[n] for n in range(len(SKIP)) if not used[n] and SKIP[n][0] in docs]
    for doc, pat, _ in stale:
        print("FAIL skip list: %s /%s/ matches no command (remove it)" % (doc, pat))

    scratch = tempfile.mkdtemp(prefix="kiln-doc.")
    env = dict(os.environ)
    env.pop("KILN_PLUGIN_PATH", None)
    env["PATH"] = kiln_bin + os.pathsep + env.get("PATH", "")
    models_ok = None
    failed, skipped, ran, nblocks = [], [], 0, 0
    t0 = time.time()
    try:
        for rel, blocks in plan:
            if not blocks:
                continue
            root = os.path.join(scratch, re.sub(r"[^A-Za-z0-9_.-]", "_", rel))
            prepare_scratch(root, src, build)
            env["TMPDIR"] = os.path.join(root, ".tmp")
            for first, cmds in blocks:
                if not cmds:
                    continue
                nblocks += 1
                where = "%s:%d" % (rel, first)
                if any("fetch-models.sh" in c.text for c in cmds if not c.skip):
                    if models_ok is None:
                        models_ok = subprocess.run(
                            ["bash", os.path.join(src, "tools", "fetch-models.sh")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
                    if not models_ok:
                        skipped.append(where + " (the real models are not available)")
                        continue
                tb = time.time()
                r = subprocess.run(["bash", "-c", block_script(cmds)], cwd=root, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=300)
                log = r.stdout.decode("utf-8", "replace")
                ran += sum(1 for c in cmds if not c.skip)
                status = "ok" if r.returncode == 0 else "FAILED"
                print("%-8s %s (%d commands, %.1f s)" % (status, where, len(cmds), time.time() - tb))
                if r.returncode != 0:
                    failed.append(where)
                    tail = log.splitlines()[-40:]
                    print("\n".join("    | " + l for l in tail))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("doc_commands: %d blocks, %d commands run, %d failed, %d skipped, %.1f s" %
          (nblocks, ran, len(failed), len(skipped), time.time() - t0))
    for s in skipped:
        print("SKIPPED " + s)
    if failed or stale:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
