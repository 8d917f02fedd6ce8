#!/usr/bin/env python3
"""Every `tessera` command the docs show runs as written: its subcommand exists and each --flag it
passes is one that `tessera <command> --help` lists.

Reads the fenced code blocks (```) of README.md and docs/*.md, joins lines continued with a
trailing backslash, and checks each command line that invokes `tessera`, `build/bin/tessera`,
`./tessera` or another path ending in `/tessera` (also after `mpirun ...`, `srun ...`, `env`, a
`VAR=value` prefix, `&&`, `;` or `|`). Comments (` # ...`) are dropped first; a word such as `...`,
`DIR` or `<file>` is a placeholder and needs no check. Only flags are checked, not their values.

Usage: python3 scripts/check_docs_commands.py path/to/tessera [repo_root]
Prints `file:line: tessera CMD: unknown flag --x` (or `unknown command`) for each failure and
exits 1 if there is any; otherwise prints `PASS: N commands in M files` and exits 0.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

# Flags every subcommand takes without listing them in its --help.
ALWAYS = {"--help", "-h"}
# Flags of `tessera` itself, given without a subcommand.
TOP_LEVEL = {"--version", "--help", "-h"}


SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
# Programs that run the command given after their own arguments.
LAUNCHERS = {"mpirun", "mpiexec", "srun", "env", "sudo", "time", "timeout", "taskset", "numactl", "nice",
             "compute-sanitizer", "nsys", "ncu", "gdb", "valgrind", "perf", "exec"}


def code_lines(path):
    """(line number, text) of each command line in the shell code blocks (``` with no language, sh,
    bash, shell or console), continuations joined. In a block that shows a session (lines starting
    with `$ `), only those lines are commands; the rest is output."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, block, fence = [], None, None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if block is None:
                block, fence = [], stripped[3:].strip().lower()
                continue
            if fence in SHELL_FENCES:
                session = any(text.lstrip().startswith("$ ") for _, text in block)
                pending, start = "", 0
                for n, text in block:
                    if session and not pending:
                        if not text.lstrip().startswith("$ "):
                            continue
                        text = text.lstrip()[2:]
                    if not pending:
                        start = n
                    if text.rstrip().endswith("\\"):
                        pending += text.rstrip()[:-1] + " "
                        continue
                    out.append((start, pending + text))
                    pending = ""
                if pending:
                    out.append((start, pending))
            block = None
            continue
        if block is not None:
            block.append((number, line))
    return out


def strip_comment(text):
    """The line without a shell comment (a # at the start or after whitespace, outside quotes)."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def is_tessera(word, aliases=()):
    """The tessera program, by path, or a shell variable bound to one earlier in the file."""
    if word == "tessera" or word.endswith("/tessera"):
        return True
    match = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", word)
    return bool(match) and match.group(1) in aliases


def invocations(text, aliases=None):
    """Each tessera invocation on a line, as its words after the program name: the program is the
    first word of a command (after VAR=value assignments), or any word after a launcher such as
    mpirun, srun or env (`bench/roofline.py --tessera build/bin/tessera` only passes its path). A
    variable bound to a tessera path (`for bin in a/tessera b/tessera`, `BIN=build/bin/tessera`) is
    added to `aliases` and counts as the program after that."""
    aliases = set() if aliases is None else aliases
    text = strip_comment(text)
    for name, values in re.findall(r"\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([^;]*)", text):
        if any(is_tessera(v) for v in values.split()):
            aliases.add(name)
    for name, value in re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=(\S+)", text):
        if is_tessera(value.strip("\"'")):
            aliases.add(name)
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        words = text.split()
    found, current, position, launched = [], None, 0, False
    split = []
    for word in words:  # "--flag;" is the flag, then the end of the command
        if word.endswith(";") and word != ";":
            split += [word[:-1], ";"]
        else:
            split.append(word)
    for word in split:
        if word in ("&&", "||", ";", "|", "(", ")", "do", "then", "else"):
            if current is not None:
                found.append(current)
            current, position, launched = None, 0, False
            continue
        if current is not None:
            current.append(word)
            continue
        if position == 0 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            continue  # VAR=value before the program
        if is_tessera(word, aliases) and (position == 0 or launched):
            current = []
        elif position == 0 and os.path.basename(word) in LAUNCHERS:
            launched = True
        position += 1
    if current is not None:
        found.append(current)
    return found


def help_flags(binary, command, env, cache):
    """The flags `tessera COMMAND --help` lists, or None when the command does not exist."""
    if command in cache:
        return cache[command]
    run = subprocess.run([binary, command, "--help"], capture_output=True, text=True, env=env, timeout=60)
    text = run.stdout + run.stderr
    flags = None
    if run.returncode != 0 or "usage:" not in text:
        cache[(command, "why")] = f"`tessera {command} --help` exited {run.returncode}"
    else:
        flags = set(re.findall(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*|-[A-Za-z](?![\w-]))", text)) | ALWAYS
    cache[command] = flags
    return flags


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    binary = os.path.abspath(argv[1])
    if not os.access(binary, os.X_OK):
        print(f"FAIL: {argv[1]} is not an executable tessera binary")
        return 1
    root = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    env = dict(os.environ)
    cache, failures, checked, with_commands = {}, [], 0, set()
    for path in files:
        shown = os.path.relpath(path, root)
        aliases = set()
        for number, text in code_lines(path):
            for words in invocations(text, aliases):
                checked += 1
                with_commands.add(shown)
                if not words or words[0].startswith("-"):
                    for flag in (w.split("=", 1)[0] for w in words if w.startswith("-")):
                        if flag not in TOP_LEVEL:
                            failures.append(f"{shown}:{number}: tessera: unknown flag {flag}")
                    continue
                command, rest = words[0], words[1:]
                flags = help_flags(binary, command, env, cache)
                if flags is None:
                    why = cache.get((command, "why"), "")
                    failures.append(f"{shown}:{number}: tessera {command}: unknown command ({why})")
                    continue
                for word in rest:
                    if not word.startswith("-") or word == "-" or re.fullmatch(r"-[0-9.]+(e-?[0-9]+)?", word):
                        continue  # a value, a placeholder, or a negative number
                    flag = word.split("=", 1)[0]
                    if flag not in flags:
                        failures.append(f"{shown}:{number}: tessera {command}: unknown flag {flag}")
    for failure in failures:
        print(failure)
    if failures:
        print(f"FAIL: {len(failures)} of the docs' tessera commands do not match the CLI ({checked} checked)")
        return 1
    print(f"PASS: {checked} commands in {len(with_commands)} files match `tessera COMMAND --help`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
