"""The ignore rules (.gantryignore, gitignore syntax) and the project files they let through: what
the scanner reads and what a build packs (``scan.py --files``). Like scan.py, this module stays
standard-library only and imports nothing from the package: scan.py imports it as a bare file when
the CLI runs it.
"""

from __future__ import annotations

import os
import re

__all__ = ["IGNORE_FILE", "ALWAYS_IGNORED", "IgnoreRules", "load_ignore_rules", "project_files"]

IGNORE_FILE = ".gantryignore"
# Never part of a project, whatever the ignore file says (it cannot re-include them).
ALWAYS_IGNORED = frozenset({".git", ".gantry", ".venv", "venv", "__pycache__", "node_modules", ".env"})


def _glob_to_regex(pattern):
    """Translates one gitignore glob (already without leading '/', trailing '/' and '!') to a regex body."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                after = i + 2
                if at_start and after == n:
                    out.append(".*")  # "dir/**": everything inside
                    i = after
                    continue
                if at_start and pattern.startswith("/", after):
                    out.append("(?:.*/)?")  # "**/x" and "a/**/b": any number of directories, none included
                    i = after + 1
                    continue
                # Any other "**" is an ordinary star.
                out.append("[^/]*")
                i = after
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))  # no closing bracket: a literal '['
            else:
                body = pattern[i + 1:j]
                neg = body[:1] in ("!", "^")
                if neg:
                    body = body[1:]
                body = body.replace("\\", "\\\\")
                out.append(("[^/" if neg else "[") + body + "]")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class IgnoreRules:
    """gitignore-style rules: the last rule that matches a path decides; '!' re-includes."""

    def __init__(self, lines=()):
        self.rules = []  # (regex, negated, dir_only)
        for raw in lines:
            self.add(raw)

    def add(self, raw):
        line = raw.rstrip("\n").rstrip("\r")
        # Trailing spaces are dropped unless escaped with a backslash.
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        line = stripped
        if not line or line.startswith("#"):
            return
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return
        # A slash anywhere but at the end ties the pattern to the project root.
        anchored = "/" in line
        line = line.lstrip("/")
        if not line:
            return
        body = _glob_to_regex(line)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$", re.DOTALL)
        self.rules.append((regex, negated, dir_only))

    def ignored(self, rel, is_dir):
        """Whether the path (relative, '/'-separated) is ignored; its parents are not considered."""
        if any(part in ALWAYS_IGNORED for part in rel.split("/")):
            return True
        result = False
        for regex, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.match(rel):
                result = not negated
        return result


def load_ignore_rules(root):
    path = os.path.join(root, IGNORE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return IgnoreRules(f.read().splitlines())
    except FileNotFoundError:
        return IgnoreRules()


def project_files(root, rules=None):
    """Every file under root that the ignore rules let through, relative and '/'-separated, sorted.

    As with git, a file inside an ignored directory cannot be re-included: ignored directories are
    not entered. Symbolic links are listed only when they point at a file inside the project, so a
    link cannot pull files from elsewhere on the machine into an artifact.
    """
    root = os.path.abspath(root)
    real_root = os.path.realpath(root)
    rules = rules if rules is not None else load_ignore_rules(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                continue  # os.walk does not follow them either; say so by skipping explicitly
            if not rules.ignored(rel_dir + d, True):
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = rel_dir + name
            if rules.ignored(rel, False):
                continue
            if os.path.islink(full):
                target = os.path.realpath(full)
                if not os.path.isfile(target) or os.path.commonpath([real_root, target]) != real_root:
                    continue
            elif not os.path.isfile(full):
                continue  # sockets, fifos
            found.append(rel)
    return sorted(found)
