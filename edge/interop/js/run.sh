#!/usr/bin/env bash
# Runs the @a2a-js/sdk interop test against an a2abus that is already
# running at $A2ABUS_URL (serving the agents "echo" and "tck"). Builds
# nothing; deps.sh installs the pinned packages from package-lock.json when
# they are not installed yet. Extra arguments go to node, e.g.
# --test-reporter=spec or --test-name-pattern=cancel. README.md says how to
# start a2abus for it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

: "${A2ABUS_URL:?set A2ABUS_URL to the base URL of a running a2abus, e.g. http://127.0.0.1:8080}"

"./deps.sh"

exec node --test "$@" interop.test.mjs
