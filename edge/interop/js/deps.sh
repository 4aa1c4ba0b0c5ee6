#!/usr/bin/env bash
# Installs this folder's pinned npm packages (the SDK, and express for
# echo-server.mjs) from package-lock.json unless every one is already
# installed at its pinned version. run.sh and ../compare.sh call it, so a
# checkout whose node_modules predates a new pin is brought up to date.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if ! node -e '
const deps = require("./package.json").dependencies;
for (const [name, want] of Object.entries(deps)) {
	let have;
	try { have = require(`./node_modules/${name}/package.json`).version; } catch {}
	if (have !== want) process.exit(1);
}' 2>/dev/null; then
	npm ci --no-audit --no-fund >&2
fi
