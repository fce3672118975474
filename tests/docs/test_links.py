#!/usr/bin/env python3
"""The repository's Markdown pages point at files that exist, inside the repository.

Users have only the repository (or an install, which copies README.md and docs/ together), so a
relative link that leaves the tree or names a moved file is a dead end. Every `[text](target)`
outside fenced code in every *.md of the source tree (build folders, results and dot-folders
left out) must resolve, relative to its page, to an existing file or folder under the root;
web links and in-page anchors are not followed. A `#fragment` after a path is not checked.

The README keeps the two set-up commands CI and a new user rely on (.ci/run runs the test one):
`./scripts/setup.sh run` and `./scripts/setup.sh test`, each a mode scripts/setup.sh accepts.
"""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def pages():
    """Every *.md of the source tree, as paths relative to ROOT."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        # Build outputs, run folders and .git hold no pages of ours.
        dirs[:] = [d for d in dirs if not (d.startswith(".") or d.startswith("build") or d == "results")]
        found += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(".md")]
    return sorted(found)


class Links(unittest.TestCase):
    def test_every_relative_link_resolves_inside_the_tree(self):
        checked = 0
        for page in pages():
            with open(os.path.join(ROOT, page), encoding="utf-8") as f:
                text = FENCE.sub("", f.read())
            for target in LINK.findall(text):
                if re.match(r"[a-z]+://|mailto:", target) or target.startswith("#"):
                    continue
                checked += 1
                full = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target.split("#")[0]))
                with self.subTest(page=page, target=target):
                    self.assertTrue(full.startswith(ROOT + os.sep), f"{page}: {target} leaves the repository")
                    self.assertTrue(os.path.exists(full), f"{page}: {target} does not exist")
        self.assertGreater(checked, 50, "fewer links than the pages hold: the pattern is wrong")

    def test_readme_keeps_the_two_setup_commands(self):
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        with open(os.path.join(ROOT, "scripts", "setup.sh"), encoding="utf-8") as f:
            setup = f.read()
        # setup.sh's modes: the case pattern that shifts the mode off its arguments.
        accepted = re.search(r"(?m)^\s*([a-z |]+)\) shift ;;", setup)
        self.assertIsNotNone(accepted, "scripts/setup.sh: no `MODE | ...) shift ;;` line")
        modes = [m.strip() for m in accepted.group(1).split("|")]
        for mode in ("run", "test"):
            with self.subTest(mode=mode):
                command = rf"(?m)^\./scripts/setup\.sh {mode}\b"
                self.assertTrue(re.search(command, readme), f"README.md lost `./scripts/setup.sh {mode}`")
                self.assertIn(mode, modes, "scripts/setup.sh no longer takes the README's command")


if __name__ == "__main__":
    unittest.main()
