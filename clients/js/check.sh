#!/usr/bin/env bash
# The JavaScript SDK's checks: the type checks (page and worker apart), the shipped .d.ts is what
# tsc makes of pushrelay.js, the usage examples type-check, then every node test (the pure parts,
# the service worker helper, and the SDK end to end against the relay binary given).
#   clients/js/check.sh PATH_TO_PUSHRELAY        (make test-js runs it with .build/debug/pushrelay)
#   UPDATE_TYPES=1 clients/js/check.sh PATH      (rewrites pushrelay.d.ts first)
# Needs Node ≥ 20 and tsc (Debian's node-typescript; `make test-deps` installs it). No npm.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PATH_TO_PUSHRELAY" >&2; exit 2; }
binary=$(realpath "$1")
[ -x "$binary" ] || { echo "not an executable: $1" >&2; exit 2; }
cd "$(dirname "$0")"
command -v tsc >/dev/null || { echo "tsc is missing: apt-get install node-typescript (make test-deps)" >&2; exit 2; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "Node ≥ 20 is needed, found $(node --version)" >&2; exit 2; }

echo "== VERSION in pushrelay.js is the relay's"
relay_version=$(PUSHRELAY_SERVER_KEYS=check-version-key-0123 "$binary" --version | awk '{print $2}')
sdk_version=$(sed -n 's/^export const VERSION = "\(.*\)";$/\1/p' pushrelay.js)
[ "$sdk_version" = "$relay_version" ] || { echo "pushrelay.js says $sdk_version, the relay $relay_version" >&2; exit 1; }

common=(--strict --target es2022 --module es2022 --moduleResolution node)
echo "== tsc: pushrelay.js as page code (dom)"
tsc --allowJs --checkJs --noEmit "${common[@]}" --lib es2022,dom pushrelay.js
echo "== tsc: pushrelay-sw.js and examples/sw.js as worker code (webworker)"
tsc --allowJs --checkJs --noEmit "${common[@]}" --lib es2022,webworker pushrelay-sw.js
tsc --allowJs --checkJs --noEmit "${common[@]}" --lib es2022,webworker pushrelay-sw.d.ts examples/sw.js

echo "== pushrelay.d.ts is what tsc makes of pushrelay.js"
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
tsc --allowJs --declaration --emitDeclarationOnly "${common[@]}" --lib es2022,dom --outDir "$generated" pushrelay.js
if [ "${UPDATE_TYPES:-}" = 1 ]; then cp "$generated/pushrelay.d.ts" pushrelay.d.ts; fi
if ! diff -u pushrelay.d.ts "$generated/pushrelay.d.ts"; then
  echo "pushrelay.d.ts is stale: run UPDATE_TYPES=1 $0 $1" >&2
  exit 1
fi
echo "== tsc: examples/usage.ts against pushrelay.d.ts"
tsc --noEmit "${common[@]}" --lib es2022,dom examples/usage.ts

echo "== node --test"
PUSHRELAY_BIN="$binary" node --experimental-websocket --no-warnings=ExperimentalWarning --test \
  test/unit.test.mjs test/sw.test.mjs test/e2e.test.mjs
