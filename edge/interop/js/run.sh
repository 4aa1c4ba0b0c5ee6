#!/usr/bin/env bash
# Runs the @a2a-js/sdk interop test against an a2abus that is already
# running at $A2ABUS_URL (serving the agents "echo" and "tck"). Builds
# nothing; installs the pinned SDK from package-lock.json when it is not
# installed yet. Extra arguments go to node, e.g. --test-reporter=spec or
# --test-name-pattern=cancel. README.md says how to start a2abus for it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

: "${A2ABUS_URL:?set A2ABUS_URL to the base URL of a running a2abus, e.g. http://127.0.0.1:8080}"

want=$(node -p 'require("./package.json").dependencies["@a2a-js/sdk"]')
have=$(node -p 'require("./node_modules/@a2a-js/sdk/package.json").version' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	npm ci --no-audit --no-fund
fi

exec node --test "$@" interop.test.mjs
