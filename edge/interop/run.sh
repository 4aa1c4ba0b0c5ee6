#!/usr/bin/env bash
# Interop proof with client code a2abus did not write: the official Go SDK
# (its own module here, so the product's go.mod keeps its four
# dependencies) and the official JS SDK (npm). Run from anywhere.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$here/go.mod" ]; then
	(cd "$here" && go test -race -count=1 ./...)
fi
"$here/js/ci.sh"
