#!/usr/bin/env python3
"""run_docs.py -- runs the commands of README.md and docs/*.md, so the docs cannot rot.

Every fenced code block of a page is one of:

  ```sh / ```bash      run with `bash -e -o pipefail` in the page's work folder
  ```python            run with this interpreter in the page's work folder
  ```text (csv, json, onnxtext, ...)   shown, not run

A block without a language is an error (say what it is). The blocks of one page run in order in
one fresh folder (WORK/run-*/<page>, removed when every page passed), which holds links to the repository's models/, bench/, tests/ and
tools/ and to the build folder as build/; files carry over from block to block, shell variables do not. PATH starts with the build's bin/,
PYTHONPATH with its python/ (the mpc module), and MPC_DEVICE=cpu, so `mpc-opt`, `mpc-run` and `import mpc` are what is under test.

What a page says to the runner:

  # not run by the docs test: REASON
      as the first line of a sh/python block: the block is shown, not run (a GPU, minutes of
      benchmarks, the set-up itself). The reason is visible to the reader.
  <!-- docs-test: needs MOD,MOD else: COMMAND -->
      before a block: run it when the Python modules import; otherwise run the shell COMMAND
      instead (e.g. copy a committed file to the name the block would have written).
  <!-- docs-test: needs MOD,MOD -->
      before a block: without the modules the whole test is skipped (exit 77). A block may carry
      both forms: what it needs in any case, and what it needs to run rather than its fallback.
  <!-- docs-test: expect -->
      before a text block: each of its lines must appear in the output (stdout and stderr, in
      whatever order their buffers reached the pipe) of the last block run; `...` inside a line
      matches anything, a line that is only `...` is left out, and runs of blanks match any
      blanks.

Pages must not tell the development's history: "session N", "issue N" and the like fail the test.

usage: run_docs.py --bin=DIR --source=DIR --work=DIR [PAGE.md ...]
       run_docs.py --self-test --work=DIR
Exit 0: every block ran as the page says; 1: a block failed (its text and output are printed);
77: a Python module a page needs is missing.
"""
import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUN_LANGS = {"sh", "bash", "shell", "python", "python3"}
SHOWN_LANGS = {"text", "csv", "json", "onnxtext", "console", "diff", "ini", "cmake"}
SKIP_RE = re.compile(r"^#\s*not run by the docs test:\s*(\S.*)$")
DIRECTIVE_RE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
HISTORY_RE = re.compile(r"\b(sessions?\s+\d+|this session|before session|issue\s+\d+)", re.I)
BLOCK_TIMEOUT = 300


class Block:
    def __init__(self, page, line, lang, text, directives):
        self.page, self.line, self.lang, self.text = page, line, lang, text
        self.directives = directives

    def where(self):
        return f"{self.page}:{self.line}"


class DocsError(Exception):
    pass


def parse(page, text):
    """The fenced blocks of a page, each with the docs-test directives just above it."""
    blocks, pending = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE_RE.match(line.strip())
        if m:
            pending.append(m.group(1))
            i += 1
            continue
        fence = re.match(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)", line)
        if not fence:
            if line.strip():
                pending = []  # a directive belongs to the block right below it
            i += 1
            continue
        indent, marks, lang = fence.group(1), fence.group(2), fence.group(3).lower()
        body, j = [], i + 1
        while j < len(lines) and not re.match(r"^\s*" + re.escape(marks[0]) + "{%d,}\\s*$" % len(marks),
                                               lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocsError(f"{page}:{i + 1}: a code block that is never closed")
        blocks.append(Block(page, i + 1, lang, "\n".join(body) + "\n", pending))
        pending = []
        i = j + 1
    return blocks


def needs_of(block):
    """(modules required, modules with a fallback, the fallback command or None)."""
    required, optional, fallback = [], [], None
    for d in block.directives:
        m = re.match(r"^needs\s+([\w.,\s]+?)(?:\s+else:\s*(.*))?$", d)
        if m:
            mods = [x for x in re.split(r"[,\s]+", m.group(1)) if x]
            if m.group(2):
                optional, fallback = mods, m.group(2)
            else:
                required += mods
    return required, optional, fallback


def has_module(name):
    # DOCS_TEST_WITHOUT=torch,transformers runs the pages as a machine without those would.
    if name in os.environ.get("DOCS_TEST_WITHOUT", "").split(","):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_page(page, text, blocks):
    for n, line in enumerate(text.split("\n"), 1):
        h = HISTORY_RE.search(line)
        if h:
            raise DocsError(f"{page}:{n}: '{h.group(0)}': the docs describe the product, not its "
                            f"history (that lives in git log)")
    for b in blocks:
        if not b.lang:
            raise DocsError(f"{b.where()}: a code block without a language: say what it is "
                            f"(sh or python to run it, text for output)")
        if b.lang not in RUN_LANGS and b.lang not in SHOWN_LANGS:
            raise DocsError(f"{b.where()}: unknown block language '{b.lang}' (run: "
                            f"{', '.join(sorted(RUN_LANGS))}; shown: {', '.join(sorted(SHOWN_LANGS))})")
        for d in b.directives:
            if not (d == "expect" or d.startswith("needs ")):
                raise DocsError(f"{b.where()}: unknown directive '<!-- docs-test: {d} -->'")
            if d == "expect" and b.lang in RUN_LANGS:
                raise DocsError(f"{b.where()}: 'expect' marks the output block after a command, "
                                f"not a command")


def expect(block, output, ran):
    """Each line of the text block appears, in order, in the last run block's output."""
    if ran is None:
        raise DocsError(f"{block.where()}: an 'expect' block with no command run before it")
    # Lines are matched in any order: a tool's stderr and stdout reach the pipe in the order
    # their buffers flush, not the order they were written.
    unused = [" ".join(line.split()) for line in output.split("\n")]
    for want in block.text.rstrip("\n").split("\n"):
        words = " ".join(want.split())
        if words in ("", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(part.strip()) for part in words.split("...")))
        hit = next((i for i, line in enumerate(unused) if pattern.search(line)), None)
        if hit is None:
            raise DocsError(f"{block.where()}: the output of the block at {ran.where()} lacks this "
                            f"line:\n  {want}\n--- the block:\n{ran.text}--- its output:\n{output}")
        del unused[hit]


def run_block(block, work, env, script_text=None, lang=None):
    lang = lang or block.lang
    text = script_text if script_text is not None else block.text
    if lang in ("python", "python3"):
        path = os.path.join(work, ".docs-block.py")
        cmd = [sys.executable, path]
    else:
        path = os.path.join(work, ".docs-block.sh")
        cmd = ["bash", "-e", "-o", "pipefail", path]
    with open(path, "w") as f:
        f.write(text)
    try:
        p = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise DocsError(f"{block.where()}: timed out after {BLOCK_TIMEOUT} s:\n{text}")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    output = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise DocsError(f"{block.where()}: exit code {p.returncode}\n--- the block:\n{text}"
                        f"--- its output:\n{output}")
    return output


def run_page(page, rel, blocks, source, work_root, bin_dir, log):
    work = os.path.join(work_root, re.sub(r"[^\w.-]", "_", rel))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # Pages name the repository's folders as from its root, and bench scripts take build/.
    for name in ("models", "bench", "tests", "tools"):
        os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.symlink(os.path.dirname(os.path.abspath(bin_dir)), os.path.join(work, "build"))
    env = dict(os.environ)
    # The blocks' python3 is the runner's, the one whose modules were checked.
    env["PATH"] = os.pathsep.join([os.path.abspath(bin_dir), os.path.dirname(sys.executable),
                                   env.get("PATH", "")])
    # The mpc Python module of the build under test (build/python).
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("MPC_DEVICE", "cpu")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["MPC_SOURCE"] = source
    # The mpc Python module is built only where pybind11 is and not under the
    # sanitizer builds: there, a block that imports it (and what it expects)
    # is not run, and the log says so.
    module_dir = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python")
    if module_dir not in sys.path:
        sys.path.insert(0, module_dir)
    no_module = not has_module("mpc")
    output, ran, skipped_last = "", None, False
    counts = {"run": 0, "fallback": 0, "not run": 0}
    for b in blocks:
        if "expect" in b.directives:
            if not skipped_last:
                expect(b, output, ran)
            continue
        if b.lang not in RUN_LANGS:
            continue
        skipped_last = False
        if no_module and re.search(r"\bimport mpc\b", b.text):
            counts["not run"] += 1
            skipped_last = True
            log(f"  {b.where()}: not run (this build has no mpc Python module)")
            continue
        first = b.text.split("\n", 1)[0].strip()
        if SKIP_RE.match(first):
            counts["not run"] += 1
            log(f"  {b.where()}: not run ({SKIP_RE.match(first).group(1)})")
            continue
        _, optional, fallback = needs_of(b)
        missing = [m for m in optional if not has_module(m)]
        start = time.time()
        if missing:
            output = run_block(b, work, env, script_text=fallback + "\n", lang="sh")
            counts["fallback"] += 1
            log(f"  {b.where()}: without {', '.join(missing)}: ran `{fallback}` instead")
        else:
            output = run_block(b, work, env)
            counts["run"] += 1
            log(f"  {b.where()}: ok ({time.time() - start:.1f} s)")
        ran = b
    return counts


def pages_of(source, given):
    if given:
        return [os.path.abspath(p) for p in given]
    pages = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    if os.path.isdir(docs):
        pages += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return pages


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin", help="the build's bin/ (mpc-opt, mpc-run)")
    ap.add_argument("--source", help="the repository root")
    ap.add_argument("--work", required=True, help="scratch folder (a fresh run-* folder per run)")
    ap.add_argument("--self-test", action="store_true", help="check the runner on made-up pages")
    ap.add_argument("pages", nargs="*")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test(a.work)
    if not a.bin or not a.source:
        ap.error("--bin and --source are required")
    source = os.path.abspath(a.source)
    try:
        parsed = []
        for path in pages_of(source, a.pages):
            rel = os.path.relpath(path, source)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            blocks = parse(rel, text)
            check_page(rel, text, blocks)
            parsed.append((path, rel, blocks))
        needed = set()
        for _, _, blocks in parsed:
            for b in blocks:
                if b.lang in RUN_LANGS and not SKIP_RE.match(b.text.split("\n", 1)[0].strip()):
                    needed.update(needs_of(b)[0])
        needed = sorted(needed)
        missing = [m for m in needed if not has_module(m)]
        if missing:
            print(f"docs: skipped: {sys.executable} cannot import {', '.join(missing)} "
                  f"(pip install {' '.join(missing)})")
            return 77
        total = {"run": 0, "fallback": 0, "not run": 0}
        start = time.time()
        # A folder of this run's own: two runs at once (ctest in one build tree from two
        # shells) must not empty each other's pages. Kept when a block fails.
        os.makedirs(a.work, exist_ok=True)
        work_root = tempfile.mkdtemp(prefix="run-", dir=os.path.abspath(a.work))
    except DocsError as e:
        print(f"docs: FAILED: {e}")
        return 1
    try:
        for path, rel, blocks in parsed:
            print(f"{rel}:")
            counts = run_page(path, rel, blocks, source, work_root, a.bin,
                              lambda s: print(s, flush=True))
            for k in total:
                total[k] += counts[k]
    except DocsError as e:
        print(f"docs: FAILED: {e}\n(the pages' folders are kept in {work_root})")
        return 1
    shutil.rmtree(work_root, ignore_errors=True)
    print(f"docs: {len(parsed)} pages, {total['run']} blocks run, {total['fallback']} by their "
          f"fallback, {total['not run']} not run (reason given), {time.time() - start:.1f} s")
    return 0


def self_test(work):
    """The runner catches what it must: a failing block, a missing output line, history."""
    os.makedirs(work, exist_ok=True)
    source = tempfile.mkdtemp(prefix="selftest-", dir=os.path.abspath(work))
    os.makedirs(os.path.join(source, "models"))
    cases = {
        "pass.md": ("ok", "```sh\necho hello > f.txt\n```\n\n```sh\ncat f.txt; echo 'a   b 42'\n```\n"
                          "<!-- docs-test: expect -->\n```text\nhello\na b ...\n```\n\n"
                          "```sh\n# not run by the docs test: needs a GPU\nexit 1\n```\n\n"
                          "<!-- docs-test: needs no_such_module_xyz else: echo fallback -->\n"
                          "```python\nraise SystemExit(1)\n```\n<!-- docs-test: expect -->\n"
                          "```text\nfallback\n```\n"),
        "fail.md": ("exit code 3", "```sh\ntrue\n```\n```sh\nexit 3\n```\n"),
        "expect.md": ("lacks this line", "```sh\necho one\n```\n<!-- docs-test: expect -->\n"
                                         "```text\ntwo\n```\n"),
        "twice.md": ("lacks this line", "```sh\necho a\n```\n<!-- docs-test: expect -->\n"
                                        "```text\na\na\n```\n"),
        "untagged.md": ("without a language", "```\nls\n```\n"),
        "history.md": ("not its history", "Since session 12 this works.\n"),
        "unclosed.md": ("never closed", "```sh\nls\n"),
        "needs.md": ("77", "<!-- docs-test: needs no_such_module_xyz -->\n```python\npass\n```\n"),
    }
    failures = []
    for name, (want, text) in cases.items():
        page = os.path.join(source, name)
        with open(page, "w") as f:
            f.write(text)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--bin", source, "--source",
                            source, "--work", os.path.join(source, "work"), page],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = p.stdout.decode()
        good = (p.returncode == 0 and want == "ok") or (p.returncode == 77 and want == "77") or \
               (p.returncode == 1 and want in out)
        print(f"{name}: exit {p.returncode} {'ok' if good else 'WRONG'}")
        if not good:
            failures.append(f"{name}: expected {want!r}, got exit {p.returncode}:\n{out}")
    if failures:
        print("\n".join(failures))
        return 1
    shutil.rmtree(source, ignore_errors=True)
    print("docs runner self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
