#!/usr/bin/env bash
# Contract fuzzing: schemathesis (all phases, positive and negative data, every check) against
# openapi.yaml and a real relay, with a fixed seed and a bounded example count. Three passes: the
# server key, and client tokens of two different users (object-level authorization: a client
# may only touch its own user, so the other user's routes must answer 403).
#   Tests/Peers/contract.sh PUSHRELAY_BIN [EXAMPLES]      (make test: 15; make fuzz-api: 200)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=$1
EXAMPLES=${2:-15}
ST=.venv/bin/schemathesis
TMP=$(mktemp -d /tmp/pushrelay-contract.XXXXXX)
"$BIN" serve --listen 127.0.0.1:0 --db "$TMP/relay.sqlite" --server-keys contract-server-key --log-level warning \
    --rate-limit-client-per-s 0 --matrix-notify-secret contract-matrix-secret-0123 \
    >"$TMP/out" 2>"$TMP/err" &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$TMP/out" && break; sleep 0.1; done
URL=$(sed -n 's/.*listening on //p' "$TMP/out")
token() {
    curl -sf -X POST "$URL/v1/tokens" -H 'Authorization: Bearer contract-server-key' -H 'Content-Type: application/json' \
        -d "{\"userId\":\"$1\",\"deviceId\":\"contract-device\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
# Not a device of the spec's examples: the server-key pass deletes those, which revokes their tokens.
ALICE=$(token alice)
BOB=$(token bob)
status=0
for credential in contract-server-key "$ALICE" "$BOB"; do
    for attempt in 1 2; do
        status=0
        "$ST" run openapi.yaml --url "$URL" -H "Authorization: Bearer $credential" --checks all --seed 1 \
            -n "$EXAMPLES" --workers 2 --generation-database none --no-color >"$TMP/report" 2>&1 || status=1
        # CPython 3.11.7 can fail hypothesis's description of a lambda with "AST constructor recursion
        # depth mismatch" (a SystemError inside the tool, gh-106905, not a finding): run that pass again, once.
        if [ $status -ne 0 ] && [ $attempt = 1 ] && grep -q "AST constructor recursion depth mismatch" "$TMP/report"; then
            echo "schemathesis crashed inside CPython's ast module (not a finding); running this pass again"
            continue
        fi
        break
    done
    tail -n 12 "$TMP/report"
    if [ $status -ne 0 ]; then cat "$TMP/report"; break; fi
done
if kill -0 $PID 2>/dev/null; then echo "relay still serving after the contract run"; else echo "relay died"; status=1; fi
if grep -q "level=error" "$TMP/err"; then echo "errors in the relay log:"; grep "level=error" "$TMP/err" | head; status=1; fi
exit $status
