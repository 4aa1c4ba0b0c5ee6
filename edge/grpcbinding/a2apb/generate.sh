#!/usr/bin/env bash
# Regenerates a2a.pb.go and a2a_grpc.pb.go, the protobuf messages and the
# gRPC service of A2A's lf.a2a.v1, from a2a.proto:
#
#   edge/grpcbinding/a2apb/generate.sh
#
# a2a.proto is the specification's own (github.com/a2aproject/A2A,
# specification/a2a.proto at 28491879ff41a9c230fb51f3f7bd6096b80cc341 on
# dev-1.1: the v1.0.1 messages and service plus the additive fields of the
# 1.1 task generation), unchanged. Before compiling, its google.api
# annotations (HTTP transcoding rules, method signatures, field
# behaviours) are left out: they describe the HTTP+JSON binding, which the
# edge serves itself, and change nothing on the wire, so the generated code
# needs neither the googleapis protos nor their Go package.
#
# Needs protoc (Debian: protobuf-compiler, 3.21 or later) with its
# well-known types, and on PATH the plugins of the versions the module's
# runtime libraries are at:
#
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkg=github.com/a2abus/a2abus/edge/grpcbinding/a2apb
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
awk '
	/^import "google\/api\// { next }
	/option \(google\.api\.method_signature\)/ { next }
	/option \(google\.api\.http\) = \{/ { skip = 1; depth = 0 }
	skip {
		depth += gsub(/\{/, "{") - gsub(/\}/, "}")
		if (depth <= 0) skip = 0
		next
	}
	{ gsub(/ \[\(google\.api\.field_behavior\) = [A-Z_]+\]/, ""); print }
' "$here/a2a.proto" >"$tmp/a2a.proto"
if grep -q 'google\.api' "$tmp/a2a.proto"; then
	echo "generate.sh: a google.api annotation this script does not know is left in a2a.proto:" >&2
	grep -n 'google\.api' "$tmp/a2a.proto" >&2
	exit 1
fi
protoc -I "$tmp" \
	--go_out="$tmp" --go_opt=paths=source_relative --go_opt="Ma2a.proto=$pkg;a2apb" \
	--go-grpc_out="$tmp" --go-grpc_opt=paths=source_relative --go-grpc_opt="Ma2a.proto=$pkg;a2apb" \
	"$tmp/a2a.proto"
cp "$tmp/a2a.pb.go" "$tmp/a2a_grpc.pb.go" "$here/"
