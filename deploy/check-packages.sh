#!/usr/bin/env bash
# Checks that the shipped install instructions can work, without a container engine:
#  - every shared library the relay binary loads (ldd) belongs (dpkg -S) to a package that the
#    Dockerfile's runtime stage and deploy/README.md's systemd install line name, or that one of
#    them pulls in, or that debian:bookworm-slim already has;
#  - every `.apt([...])` provider in Package.swift is installed by the Dockerfile's build stage.
# The Swift runtime's own libraries are skipped: the documented builds link it statically
# (--static-swift-stdlib). Usage: deploy/check-packages.sh PATH_TO_PUSHRELAY
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: deploy/check-packages.sh PATH_TO_PUSHRELAY}
failed=0

# The packages the `apt-get install` command names within a section of a file (comments skipped,
# continuation lines joined, up to the next `&&`).
install_line() { # file, regex of the section's first line, regex of the line after it
    python3 - "$@" <<'PY'
import re, sys
path, start, stop = sys.argv[1:]
lines, on = [], False
for line in open(path):
    if not on and re.search(start, line):
        on = True
    elif on and re.search(stop, line):
        break
    if on and not line.lstrip().startswith("#"):
        lines.append(line.rstrip("\n").rstrip("\\"))
command = " ".join(lines)
match = re.search(r"apt-get install((?:\s+[^&\s]+)+)", command)
print(" ".join(word for word in (match.group(1).split() if match else []) if not word.startswith("-")))
PY
}
# Packages of debian:bookworm-slim that the binary relies on (the C and C++ runtimes).
base="libc6 libgcc-s1 libstdc++6"
build=$(install_line deploy/Dockerfile '^FROM swift' '^WORKDIR' | tr ' ' '\n')
runtime=$(install_line deploy/Dockerfile '^FROM debian' '^# Fixed uid')
readme=$(install_line deploy/README.md '^# Runtime libraries' '^# System user')
[ -n "$build" ] && [ -n "$runtime" ] && [ -n "$readme" ] || { echo "FAILED: install lines not found"; exit 1; }

# apt-cache needs the package lists (a machine where nothing was ever installed has none).
apt-cache show libc6 >/dev/null 2>&1 || apt-get update -qq

# What installing the named packages brings (their dependencies, recursively).
closure() {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "$@" 2>/dev/null | grep -E '^[a-z0-9]' | sed 's/:.*//' | sort -u
}
runtime_closure=$(closure $runtime $base)
readme_closure=$(closure $readme $base)

for lib in $(ldd "$binary" | awk '/=> \// {print $3} /^\s*\// {print $1}'); do
    real=$(readlink -f "$lib")
    case "$real" in /opt/swift/* | */swift/linux/*) continue ;; esac
    owner=$(dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || true)
    package=${owner%%:*}
    if [ -z "$package" ]; then
        echo "FAILED: $lib ($real) belongs to no Debian package"
        failed=1
        continue
    fi
    grep -qx "$package" <<<"$runtime_closure" || { echo "FAILED: $lib needs $package, not in the Dockerfile's runtime stage"; failed=1; }
    grep -qx "$package" <<<"$readme_closure" || { echo "FAILED: $lib needs $package, not in deploy/README.md's install line"; failed=1; }
done

for provider in $(grep -oE '\.apt\(\[[^]]*\]' Package.swift | grep -oE '"[^"]+"' | tr -d '"' | sort -u); do
    grep -qx "$provider" <<<"$build" || { echo "FAILED: Package.swift's $provider is not installed by the Dockerfile's build stage"; failed=1; }
done

[ "$failed" = 0 ] && echo "ok     deploy: every library of $(basename "$binary") comes from the packages the Dockerfile and deploy/README.md install; the build stage has every Package.swift provider"
exit "$failed"
