#!/usr/bin/env python3
"""Every relative link of README.md and docs/*.md leads somewhere, and the README is the door to docs/.

A link's file must exist (relative to the page that holds it, inside the repository); a link with an #anchor
into a Markdown page (or into its own page) must name one of that page's headings, slugged as GitHub slugs
them (lower case, punctuation dropped, spaces to hyphens, "-1", "-2" for repeats). Links inside code (fenced
blocks, `spans`) are text, not links; http(s) and mailto links are not followed (no network here). Every
page under docs/ must be linked from README.md. Before the real pages, the checker runs on a small tree of
its own that holds each kind of broken link, so a checker that finds nothing fails too.
Prints every broken link as FILE:LINE: problem and exits 1; prints what it checked and exits 0 otherwise.
"""
import functools
import os
import re
import sys
import tempfile

from source_tree import report, root_from_argv

ROOT = root_from_argv(__file__)

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n)[^`]|(?!\1)`+)+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^[ ]{0,3}\[[^\]\n]+\]:[ \t]*<?([^\s>]+)>?", re.M)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


@functools.lru_cache(maxsize=None)
def outside_fences(path):
    """The page's lines, each fenced code block's lines (fences included) left empty."""
    lines, inside = [], False
    with open(path, encoding="utf-8") as file:
        for line in file:
            fence = FENCE.match(line)
            if fence:
                inside = not inside
            lines.append("" if inside or fence else line.rstrip("\n"))
    return tuple(lines)


def slug(heading):
    """GitHub's anchor for a heading's text (as github-slugger makes it)."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)          # `code` shows its text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)       # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()           # HTML tags show nothing
    text = re.sub(r"[^\w\- ]", "", text)                          # punctuation goes, letters and _ stay
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    seen, found = {}, set()
    for line in outside_fences(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def prose(path):
    """The page's text with code left out: fenced blocks become empty lines and `spans` (which may run over
    a line's end, never over a blank line) the word "code", so that line numbers stay true."""
    text = "\n".join(outside_fences(path))
    return CODE_SPAN.sub(lambda m: "code" + "\n" * m.group(0).count("\n"), text)


def links(path):
    """(line number, target) of every link on the page (its text may run over lines), code left out."""
    text = prose(path)
    found = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(text)]
    found += [(m.start(), m.group(1)) for m in REFERENCE_DEFINITION.finditer(text)]
    for start, target in sorted(found):
        yield text.count("\n", 0, start) + 1, target


def check_page(root, path):
    problems, targets = [], set()
    for number, target in links(path):
        where = f"{os.path.relpath(path, root)}:{number}"
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if os.path.relpath(resolved, root).startswith(".."):
            problems.append(f"{where}: `{target}` leads outside the repository")
            continue
        if not os.path.exists(resolved):
            problems.append(f"{where}: `{target}`: no file {os.path.relpath(resolved, root)}")
            continue
        targets.add(resolved)
        if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            problems.append(f"{where}: `{target}`: {os.path.relpath(resolved, root)} has no heading with the "
                            f"anchor #{anchor} (it has: {', '.join(sorted(anchors(resolved))) or 'none'})")
    return problems, targets


def check_tree(root):
    """Problems of README.md and docs/**/*.md under root, and how many links were checked."""
    readme = os.path.join(root, "README.md")
    pages = [readme] if os.path.exists(readme) else []
    for directory, _, files in os.walk(os.path.join(root, "docs")):
        pages += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".md")]
    problems, checked, linked_from_readme = [], 0, set()
    if not os.path.exists(readme):
        problems.append("README.md: missing")
    for page in pages:
        found, targets = check_page(root, page)
        problems += found
        checked += sum(1 for _ in links(page))
        if page == readme:
            linked_from_readme = targets
    for page in pages:
        if page != readme and page not in linked_from_readme:
            problems.append(f"{os.path.relpath(page, root)}: not linked from README.md (the door to docs/)")
    return problems, len(pages), checked


def self_test():
    """The checker finds each kind of broken link in a tree made for it, and passes the good ones."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w") as file:
            file.write("# Door\n\n[good](docs/a.md) [good anchor](docs/a.md#faults-what-train-does)\n"
                       "[second](docs/a.md#notes-1) [own](#door) [web](https://example.com/x) [a link\n"
                       "over two lines](docs/a.md#notes) [another one\nbroken](docs/a.md#gone)\n"
                       "[missing file](docs/nothing.md) [missing anchor](docs/a.md#no-such-heading)\n"
                       "`[in code](docs/nowhere.md)`\n```\n[in a block](docs/nowhere.md)\n```\n"
                       "[outside](../../etc/passwd)\n")
        with open(os.path.join(root, "docs", "a.md"), "w") as file:
            file.write("# A\n\n## Faults: what `train` does\n\n## Notes\n\n## Notes\n\n[back](../README.md#door)\n")
        with open(os.path.join(root, "docs", "orphan.md"), "w") as file:
            file.write("# Orphan\n")
        problems, _, _ = check_tree(root)
    expected = ["docs/nothing.md", "#no-such-heading", "#gone", "outside the repository", "orphan.md: not linked"]
    missed = [e for e in expected if not any(e in p for p in problems)]
    if missed or len(problems) != len(expected):
        print("test_doc_links.py: the checker itself is wrong on its own test tree:")
        print("  expected problems with: " + "; ".join(expected))
        print("  found: " + ("; ".join(problems) or "none"))
        return False
    return True


def main():
    if not self_test():
        return 1
    problems, pages, checked = check_tree(ROOT)
    return report("doc links", problems, f"{len(problems)} broken link(s) in README.md and docs/",
                  f"{checked} links in {pages} pages (README.md and docs/) lead to existing files and headings; "
                  "every docs/ page is linked from README.md")


if __name__ == "__main__":
    sys.exit(main())
