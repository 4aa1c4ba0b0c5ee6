#!/usr/bin/env bash
# Interop proof with client code a2abus did not write: the official Go SDK
# (its own module here, so the product's go.mod keeps its four
# dependencies) and the official JS SDK (npm). Run from anywhere.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# One a2abus binary for the process tests of both parts, built as the
# tests are (race detector, no profile-guided optimisation): after the
# README's `go test -race ./...` every package it needs is in the build
# cache and only the link is new, where a plain build compiles
# nats-server and the standard library once more (about two minutes on 2
# cores). The processes the SDK clients talk to are checked for races too.
(cd "$root" && go build -race -pgo=off -o "$work/a2abus" ./cmd/a2abus)
export A2ABUS_INTEROP_BIN="$work/a2abus"
if [ -f "$here/go.mod" ]; then
	(cd "$here" && go test -race -count=1 ./...)
fi
"$here/js/ci.sh"
