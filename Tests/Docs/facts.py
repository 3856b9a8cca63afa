#!/usr/bin/env python3
"""Facts the documents state that can be checked against the code and against each other:

- every route of `openapi.yaml` is in ARCHITECTURE.md §3 as `METHOD /path`, and every
  `METHOD /path` of §3 is in `openapi.yaml` (the README calls §3 the contract field by field);
- the version: `RelayConfig.version` is `openapi.yaml`'s `info.version`, the top released section
  of CHANGELOG.md (under `## [Unreleased]`), what OPERATIONS.md says `--version` prints, the
  supported version in SECURITY.md, and every "the code says X.Y.Z";
- the clients' signal rate: every passage that gives it says it is per user, with the rate and
  burst of `SignalAdmission`, and none says "per socket";
- `openapi.yaml` has no plain (unquoted) scalar holding `: `, which YAML refuses (the contract
  run found one only after a ten-minute build).

The standard library only, like links.py: `make test` runs it before anything is installed."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def read(relative):
    return (ROOT / relative).read_text(encoding="utf-8")


def openapi_routes():
    """(METHOD, path) of every operation under `paths:`, read by indentation (no YAML library)."""
    routes, path, in_paths = set(), None, False
    for line in read("openapi.yaml").splitlines():
        if re.match(r"^\S", line):
            in_paths = line.rstrip() == "paths:"
            path = None
            continue
        if not in_paths:
            continue
        match = re.match(r"^  (/\S*):\s*$", line)
        if match:
            path = match.group(1)
            continue
        match = re.match(r"^    ([a-z]+):\s*$", line)
        if match and path and match.group(1) in METHODS:
            routes.add((match.group(1).upper(), path))
    return routes


def section(text, start, end):
    """The text from the heading that starts with `start` up to the next one starting with `end`."""
    begin = re.search(rf"^{re.escape(start)}", text, re.M)
    if not begin:
        return ""
    rest = text[begin.end():]
    finish = re.search(rf"^{re.escape(end)}", rest, re.M)
    return rest[: finish.start()] if finish else rest


def check_routes(failures):
    routes = openapi_routes()
    if not routes:
        failures.append("openapi.yaml: no routes found under paths:")
    contract = section(read("docs/ARCHITECTURE.md"), "## 3.", "## 4.")
    if not contract:
        failures.append("docs/ARCHITECTURE.md: no section 3")
    named = set(re.findall(r"`(GET|PUT|POST|DELETE|PATCH|HEAD|OPTIONS) (/[^`\s?]*)[`?\s]", contract))
    for method, path in sorted(routes - named):
        failures.append(f"docs/ARCHITECTURE.md §3 does not name `{method} {path}` (in openapi.yaml)")
    for method, path in sorted(named - routes):
        failures.append(f"docs/ARCHITECTURE.md §3 names `{method} {path}`, which openapi.yaml lacks")
    return len(routes)


def check_version(failures):
    match = re.search(r'static let version = "([^"]+)"', read("Sources/RelaySettings/RelayConfig.swift"))
    if not match:
        failures.append("Sources/RelaySettings/RelayConfig.swift: no `static let version`")
        return None
    version = match.group(1)

    info = re.search(r"^info:\n((?:[ \t].*\n|\n)*)", read("openapi.yaml"), re.M)
    found = info and re.search(r"^  version:\s*['\"]?([^'\"\s]+)", info.group(1), re.M)
    if not found or found.group(1) != version:
        failures.append(f"openapi.yaml info.version is {found and found.group(1)}, the code's is {version}")

    headings = re.findall(r"^## \[([^\]]+)\]", read("CHANGELOG.md"), re.M)
    if not headings or headings[0] != "Unreleased":
        failures.append("CHANGELOG.md: the first section is not `## [Unreleased]`")
    released = [h for h in headings if h != "Unreleased"]
    if not released or released[0] != version:
        failures.append(f"CHANGELOG.md: the top released section is {released[:1]}, the code's version is {version}")

    printed = re.findall(r"print `pushrelay (\S+)`", read("docs/OPERATIONS.md"))
    if printed != [version]:
        failures.append(f"docs/OPERATIONS.md says `--version` prints {printed}, the code's version is {version}")
    supported = re.findall(r"the main branch \((\S+) and the", read("SECURITY.md"))
    if supported != [version]:
        failures.append(f"SECURITY.md supports {supported}, the code's version is {version}")

    for document in documents():
        for said in re.findall(r"the code says (\d+\.\d+\.\d+)", document.read_text(encoding="utf-8")):
            if said != version:
                failures.append(f"{document.relative_to(ROOT)}: 'the code says {said}', the code's version is {version}")
    return version


def documents():
    """What a reader takes for the present: README and docs/ (CHANGELOG tells history)."""
    return [ROOT / "README.md", ROOT / "SECURITY.md"] + sorted((ROOT / "docs").glob("*.md"))


def passages(path):
    """Paragraphs and table rows of a Markdown file or openapi.yaml; `///` comment blocks of Swift."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".swift":
        blocks, block = [], []
        for line in text.splitlines():
            if line.strip().startswith("///"):
                block.append(line.strip()[3:])
            elif block:
                blocks.append(" ".join(block))
                block = []
        return blocks
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.splitlines()
        rows = [line for line in lines if line.lstrip().startswith("|")]
        found += rows
        rest = " ".join(line.strip() for line in lines if not line.lstrip().startswith("|"))
        if rest:
            found.append(rest)
    return found


def check_signal_rate(failures):
    admission = read("Sources/RelayCore/SignalAdmission.swift")
    rate = re.search(r"static let defaultRatePerSecond = ([\d.]+)", admission)
    burst = re.search(r"burst = ratePerSecond \* (\d+)", admission)
    if not rate or not burst:
        failures.append("Sources/RelayCore/SignalAdmission.swift: rate or burst not found")
        return 0
    rate = int(float(rate.group(1)))
    burst = rate * int(burst.group(1))
    sources = documents() + [ROOT / "openapi.yaml"] + sorted((ROOT / "Sources/RelayClient").glob("*.swift"))
    checked = 0
    for path in sources:
        for passage in passages(path):
            if not re.search(r"signal", passage, re.I):
                continue
            where = f"{path.relative_to(ROOT)}: {passage.strip()[:90]}…"
            if re.search(r"per[- ]socket", passage, re.I):
                failures.append(f"{where} says the signal rate is per socket (it is per user)")
            for number in re.findall(r"\b(\d+)\s*(?:signals?\s*)?(?:/s\b|per second)", passage):
                checked += 1
                if int(number) != rate:
                    failures.append(f"{where} gives {number}/s, SignalAdmission's rate is {rate}/s")
                elif not re.search(r"\buser", passage, re.I):
                    failures.append(f"{where} gives the signal rate without saying it is per user")
            for number in re.findall(r"burst (\d+)", passage):
                if int(number) != burst:
                    failures.append(f"{where} gives a burst of {number}, SignalAdmission's is {burst}")
    if checked == 0:
        failures.append("no document gives the clients' signal rate")
    return checked


def check_plain_scalars(failures):
    for number, line in enumerate(read("openapi.yaml").splitlines(), 1):
        match = re.match(r"^\s*(?:- )?[A-Za-z_$][\w$-]*: (.+)$", line)
        if match and not match.group(1).startswith(("'", '"', "|", ">", "[", "{")) and ": " in match.group(1):
            failures.append(f"openapi.yaml:{number}: a plain scalar holds ': ' (quote it): {line.strip()[:80]}")


def main():
    failures = []
    check_plain_scalars(failures)
    routes = check_routes(failures)
    version = check_version(failures)
    rates = check_signal_rate(failures)
    for failure in failures:
        print("FAIL", failure)
    print(f"{routes} routes, version {version}, {rates} mentions of the signal rate checked; {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
