#!/usr/bin/env python3
"""Every relative link in the repository's Markdown resolves: the file exists inside the
repository and, for a `#fragment`, the target file has a heading with that GitHub anchor.
Documents move between README and docs/; a link that went stale is found here, not by a reader."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
SKIP = {".build", ".venv", ".venv-synapse", ".git", "node_modules"}


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        counts = {}
        fence = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence or not line.startswith("#"):
                continue
            title = line.lstrip("#").strip()
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link keeps its text
            slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
        for name in re.findall(r"<a (?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")):
            found.add(name)
        cache[path] = found
    return cache[path]


def main():
    failures = []
    documents = [p for p in ROOT.rglob("*.md") if not SKIP.intersection(p.relative_to(ROOT).parts)]
    for doc in documents:
        text = doc.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for match in LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z]+:", target) or target.startswith("//"):
                continue  # http(s), mailto: not checked here (no network in CI)
            path, _, fragment = target.partition("#")
            resolved = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(ROOT)}: ({target})"
            if path and not resolved.is_relative_to(ROOT):
                failures.append(f"{where}: points outside the repository")
            elif not resolved.exists():
                failures.append(f"{where}: no such file")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                failures.append(f"{where}: no heading #{fragment}")
    for failure in failures:
        print("FAIL", failure)
    print(f"{len(documents)} documents checked, {len(failures)} broken links")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
