#!/usr/bin/env bash
# The official A2A conformance suite, the TCK (a2aproject/a2a-tck, branch
# 1.0-dev: pytest, tests/compatibility/), against this tree's a2abus, in
# one command: every binding the card declares in one run (JSON-RPC 1.0,
# HTTP+JSON 1.0, gRPC lf.a2a.v1) unless TCK_TRANSPORTS narrows it.
#
# It builds a2abus from the repository it sits in and starts `a2abus serve`
# on loopback ports of its own (TCK_PORT, default 9801, for HTTP; the next
# one gRPC, the one after the embedded NATS: compare.sh uses 9731–9740,
# proxy.sh 9741–9744, capacity.sh 9750–9779), with a fresh data directory,
# the `tck` agent alone (the conformance agent: behaviour by messageId
# prefix) and push notifications on, allowed to http:// and loopback
# webhooks (the TCK's webhook receiver listens on localhost over plain
# HTTP). Once the card answers it runs the command the TCK's run_tck.py
# runs against http://127.0.0.1:9801, and stops serve on any exit.
#
# The TCK's test code (tests/, tck/) runs as checked out, never modified;
# the checkout itself is not written to (a copy runs). The workarounds,
# all for the environment:
# - Python: the TCK's dependencies come from PyPI (pytest >= 8, grpcio,
#   protobuf, httpx, jsonschema, googleapis-common-protos), which the
#   development machine cannot reach, and Debian bookworm's pytest is 7.2.
#   So the TCK runs in a Debian trixie chroot (debootstrap, every package
#   from the Debian mirror: pytest 8.3, grpcio 1.51, protobuf 4.21), built
#   once in TCK_ROOT and reused: one Python for every run keeps runs
#   comparable. debootstrap stops on python3-grpcio, whose libre2
#   dependency is a virtual package it cannot resolve; `apt-get -f install`
#   in the chroot finishes the job.
# - gRPC stubs: the TCK's checked-in specification/generated/ was made for
#   protobuf 6.30 and refuses an older runtime. The copy's stubs are remade
#   from the TCK's own a2a.proto with Debian's protoc and gRPC plugin, and
#   a2a_pb2_grpc.py's `import a2a_pb2` becomes `from specification.generated
#   import a2a_pb2`: with Debian's protobuf the module otherwise loads twice
#   (as a2a_pb2 and specification.generated.a2a_pb2) and the stub's
#   messages fail the TCK's isinstance checks. Generated code only.
# - run_tck.py: it always passes --html, which needs pytest-html (not in
#   Debian; nor is gherkin-official, which the tests do not import), so
#   pytest runs directly with run_tck.py's other arguments: the same tests.
# - example.com: the TCK creates push configs for the webhook
#   https://example.com/tck-push-webhook, and a2abus refuses a webhook whose
#   host does not resolve. Where example.com does not resolve (no outside
#   DNS), serve runs in a private mount namespace (unshare -m) whose
#   /etc/hosts, a copy of this one, maps it to 127.0.0.1, and says so.
#
#   edge/interop/tck.sh [outdir] [pytest args...]   e.g. tck.sh /tmp/tck-run -k subscribe
#
# The output directory (default: a new one under the cache directory,
# printed) gets pytest.log (the whole verbose run), junitreport.xml,
# compatibility.json and compatibility.html (the TCK's own report),
# a2abus.log, versions.txt (a2abus's and the TCK's revisions, the Python
# packages), setup.log when the chroot was built or completed, and
# stubs.log when remaking the stubs had something to say.
# The summary line, the TCK's overall compatibility and the failed tests
# (with their requirement ids) are printed. The run takes about 3 minutes
# on 2 cores; building the chroot the first time a few more; it needs root
# (chroot, unshare), git, curl, Go, and debootstrap, which it installs with
# apt-get where it is missing.
#
# Environment:
#   TCK_DIR        an existing checkout of the TCK to run (default: a clone
#                  of TCK_REPO in the cache directory, at TCK_REF, fetched
#                  again every run; offline, the ref already there is used)
#   TCK_REPO       default https://github.com/a2aproject/a2a-tck
#   TCK_REF        branch, tag or commit, default 1.0-dev
#   TCK_ROOT       the chroot, default ${XDG_CACHE_HOME:-$HOME/.cache}/a2abus-tck/trixie-root;
#                  built when absent, brought up to the package list when
#                  incomplete, used as it is otherwise (no network then)
#   TCK_MIRROR     the Debian mirror for debootstrap, default http://deb.debian.org/debian
#   TCK_PYTHON     chroot (default) or host: the python3 on PATH, with
#                  pytest >= 8, httpx, grpcio, protobuf >= 4.25,
#                  googleapis-common-protos and jsonschema installed; the
#                  stubs are remade (grpc_tools, else protoc and
#                  grpc_python_plugin) only when the checked-in ones do not
#                  load; root is needed then only for the example.com mapping
#   TCK_TRANSPORTS all (default) or some of jsonrpc, http_json, grpc,
#                  separated by commas or spaces
#   TCK_OUT        the output directory, when no argument names it
#   TCK_PORT       the first of the three ports, default 9801
#   TCK_EXPECT_FAILURES
#                  the failures known to the caller, separated by spaces:
#                  each a test id (whole, or its end after a `::`, with or
#                  without the [transport] parameter) or a requirement id
#                  (CARD-STRUCT-001: any of its tests); any other failure
#                  makes the exit status 4
#
# Exit status: 0 when the run completed, whatever failed in it; 1 when the
# setup failed (usage, not root, no chroot or TCK, the build, a port taken,
# serve not coming up, stubs that do not load); 3 when the run did not
# complete or is not valid (pytest ended with status 2 or more, e.g.
# interrupted or nothing collected; no junit report; serve exited during
# the run); 4 when TCK_EXPECT_FAILURES is set and a test failed that it
# does not name.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/a2abus-tck"
croot="${TCK_ROOT:-$cache/trixie-root}"
mode="${TCK_PYTHON:-chroot}"
ref="${TCK_REF:-1.0-dev}"
repo="${TCK_REPO:-https://github.com/a2aproject/a2a-tck}"
mirror="${TCK_MIRROR:-http://deb.debian.org/debian}"
port="${TCK_PORT:-9801}"
transports="$(echo "${TCK_TRANSPORTS:-all}" | tr ' ' ',' | tr -s ',' | sed 's/^,//; s/,$//')"
out="${TCK_OUT:-}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out="$1"; shift; fi
out="${out:-$cache/runs/$(date -u +%Y%m%dT%H%M%SZ)}"
t0=$SECONDS

die() { echo "tck.sh: $*" >&2; exit 1; }
say() { echo "tck.sh: $*"; }

case "$mode" in chroot | host) ;; *) die "TCK_PYTHON must be chroot or host, not $mode" ;; esac
case "$port" in '' | *[!0-9]*) die "TCK_PORT must be a port number, not $port" ;; esac
if [ "$transports" != all ]; then
	for t in ${transports//,/ }; do
		case "$t" in jsonrpc | http_json | grpc) ;; *) die "TCK_TRANSPORTS: unknown transport $t (jsonrpc, http_json, grpc or all)" ;; esac
	done
fi
if [ "$mode" = chroot ] && [ "$(id -u)" -ne 0 ]; then
	die "the chroot needs root (chroot, unshare, mount); run as root, or with TCK_PYTHON=host"
fi
for c in git curl go; do command -v "$c" >/dev/null || die "needs $c"; done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
for p in "$port" $((port + 1)) $((port + 2)); do
	rc=0
	curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$p/" || rc=$?
	[ "$rc" -eq 7 ] || die "127.0.0.1:$p is in use (set TCK_PORT to another first port of three)"
done

# The packages of the chroot: the first ten are debootstrap's --include,
# the last two (the gRPC plugin for protoc, the well-known .proto files)
# are installed after it.
pkgs=(python3-pytest python3-pytest-asyncio python3-httpx python3-grpcio python3-protobuf
	python3-googleapis-common-protos python3-jsonschema python3-jinja2 python3-grpc-tools protobuf-compiler
	protobuf-compiler-grpc libprotobuf-dev)

work="$(mktemp -d)"
pid=
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# inroot CMD...: CMD in the chroot, with a clean environment, in a private
# mount namespace of its own that has /proc and the output directory (at
# /tck-out) mounted; the mounts end with it.
inroot() {
	mkdir -p "$croot/tck-out"
	# shellcheck disable=SC2016 # the script's own parameters
	unshare -m --propagation private sh -c '
		r=$1 o=$2; shift 2
		mount -t proc proc "$r/proc" && mount --bind "$o" "$r/tck-out" &&
			exec chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
				HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@"' sh "$croot" "$out" "$@"
}

# chroot_ready: the chroot has python3 and every package installed.
chroot_ready() {
	local st
	[ -x "$croot/usr/bin/python3" ] || return 1
	# shellcheck disable=SC2016 # a dpkg-query format
	st="$(chroot "$croot" dpkg-query -W -f '${db:Status-Abbrev}\n' "${pkgs[@]}" 2>/dev/null)" || return 1
	[ "$(grep -c '^ii' <<<"$st")" -eq "${#pkgs[@]}" ]
}

# setupfail WHAT: the end of setup.log, then exit 1.
setupfail() { tail -n 30 "$out/setup.log" >&2 || true; die "$1 (whole log: $out/setup.log)"; }

# build_chroot: debootstrap when there is no system in TCK_ROOT yet, then
# apt-get until every package is installed.
build_chroot() {
	local inc
	if [ ! -x "$croot/usr/bin/apt-get" ]; then
		if [ -d "$croot" ] && [ -n "$(ls -A "$croot")" ] && [ ! -d "$croot/debootstrap" ]; then
			die "TCK_ROOT=$croot is neither empty nor a chroot being built; remove it or set TCK_ROOT elsewhere"
		fi
		if ! command -v debootstrap >/dev/null; then
			command -v apt-get >/dev/null || die "needs debootstrap"
			say "installing debootstrap (apt-get)"
			{ apt-get install -y -q debootstrap || { apt-get update -q && apt-get install -y -q debootstrap; }; } >>"$out/setup.log" 2>&1 ||
				setupfail "could not install debootstrap"
		fi
		mkdir -p "$croot"
		inc="$(IFS=,; echo "${pkgs[*]:0:10}")"
		say "building a Debian trixie chroot in $croot from $mirror (once; a few minutes)"
		if ! debootstrap --variant=minbase --include="$inc" trixie "$croot" "$mirror" >>"$out/setup.log" 2>&1; then
			[ -x "$croot/usr/bin/apt-get" ] || setupfail "debootstrap failed"
			say "debootstrap stopped before configuring everything (python3-grpcio's virtual libre2 dependency, as expected); apt-get -f install finishes"
		fi
	else
		say "completing the chroot in $croot (apt-get)"
	fi
	cp -L /etc/resolv.conf "$croot/etc/resolv.conf" 2>/dev/null || true
	inroot env DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$out/setup.log" 2>&1 || setupfail "apt-get update in the chroot failed"
	inroot env DEBIAN_FRONTEND=noninteractive apt-get -f install -y -q >>"$out/setup.log" 2>&1 || setupfail "apt-get -f install in the chroot failed"
	inroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$out/setup.log" 2>&1 ||
		setupfail "apt-get install in the chroot failed"
	chroot_ready || setupfail "the chroot still misses packages: ${pkgs[*]}"
}

# The TCK: TCK_DIR as it is, or the cached clone at TCK_REF.
if [ -n "${TCK_DIR:-}" ]; then
	tck="$(cd "$TCK_DIR" && pwd)" || die "TCK_DIR=$TCK_DIR is not a directory"
else
	tck="$cache/a2a-tck"
	if [ ! -d "$tck/.git" ]; then
		say "cloning $repo into $tck"
		mkdir -p "$cache"
		git clone -q "$repo" "$tck" || die "could not clone $repo (set TCK_DIR to a checkout)"
	fi
	if git -C "$tck" fetch -q "$repo" "$ref" 2>/dev/null; then
		git -C "$tck" checkout -q --detach FETCH_HEAD
	else
		rev="$(git -C "$tck" rev-parse -q --verify "refs/remotes/origin/$ref^{commit}" ||
			git -C "$tck" rev-parse -q --verify "$ref^{commit}")" || die "could not fetch $ref from $repo, and $tck does not have it"
		say "could not fetch $ref from $repo: using the $ref already in $tck"
		git -C "$tck" checkout -q --detach "$rev"
	fi
fi
if [ ! -d "$tck/tests/compatibility" ] || [ ! -f "$tck/specification/a2a.proto" ]; then
	die "$tck is not a checkout of the 1.0 TCK (no tests/compatibility or specification/a2a.proto)"
fi
tckrev="$(git -C "$tck" log -1 --format='%h %s' 2>/dev/null || echo 'not a git checkout')"
if [ -n "$(git -C "$tck" status --porcelain 2>/dev/null)" ]; then tckrev="$tckrev (with local changes)"; fi

# The Python that runs it, and the copy of the TCK it runs: in the chroot
# at /a2a-tck (left there after the run), or in the temporary directory.
if [ "$mode" = chroot ]; then
	if chroot_ready; then say "reusing the chroot $croot"; else build_chroot; fi
	copy="$croot/a2a-tck" tout=/tck-out
else
	python3 - <<'PY' || die "TCK_PYTHON=host: python3 needs pytest >= 8, httpx, grpcio, protobuf, googleapis-common-protos and jsonschema"
import google.api.annotations_pb2, google.protobuf, grpc, httpx, jsonschema, pytest
assert int(pytest.__version__.split(".")[0]) >= 8, "pytest %s is older than 8" % pytest.__version__
PY
	copy="$work/a2a-tck" tout="$out"
fi
rm -rf "$copy"
mkdir -p "$copy"
tar -C "$tck" --exclude=./.git --exclude=./.venv --exclude=./reports --exclude=__pycache__ -cf - . | tar -C "$copy" -xf -

# tckrun CMD...: CMD in the TCK's copy, with the Python chosen.
tckrun() {
	if [ "$mode" = chroot ]; then
		inroot sh -c 'cd /a2a-tck && exec "$@"' sh "$@"
	else
		(cd "$copy" && "$@")
	fi
}

# The stubs: remade in the chroot always (the same code every run), by
# Debian's protoc and gRPC plugin; on the host only when the checked-in
# ones do not load, by grpc_tools (grpcio-tools) or else protoc with
# grpc_python_plugin, whichever first gives stubs that load. Each remade
# a2a_pb2_grpc.py then imports a2a_pb2 as the package's module.
stubs_load() { tckrun python3 -c 'from specification.generated import a2a_pb2, a2a_pb2_grpc' >>"$out/stubs.log" 2>&1; }
patch_stubs() {
	local f="$copy/specification/generated/a2a_pb2_grpc.py"
	sed -i 's/^import a2a_pb2 as a2a__pb2$/from specification.generated import a2a_pb2 as a2a__pb2/' "$f"
	grep -q '^from specification.generated import a2a_pb2 as a2a__pb2$' "$f" ||
		{ echo "the remade $f does not import a2a_pb2 as expected: the stub patch needs a look" >>"$out/stubs.log"; return 1; }
}
: >"$out/stubs.log"
if [ "$mode" = chroot ]; then
	{ tckrun sh -c 'cd specification && protoc -I. -I/usr/include -I/usr/lib/python3/dist-packages --python_out=generated \
		--grpc_out=generated --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin a2a.proto' >>"$out/stubs.log" 2>&1 &&
		patch_stubs && stubs_load; } || { cat "$out/stubs.log" >&2; die "remaking the gRPC stubs in the chroot failed"; }
	say "gRPC stubs remade from the TCK's a2a.proto (Debian's protoc)"
elif ! stubs_load; then
	echo "(the checked-in stubs do not load: remaking them)" >>"$out/stubs.log"
	inc="$(python3 -c 'import google.api.annotations_pb2 as a, os; print(os.path.dirname(os.path.dirname(os.path.dirname(a.__file__))))')"
	made=
	for g in grpc_tools protoc; do
		case "$g" in
		grpc_tools)
			python3 -c 'import grpc_tools' 2>/dev/null || continue
			wk="$(python3 -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
			gen=(python3 -m grpc_tools.protoc "-I$wk" --grpc_python_out=generated)
			;;
		protoc)
			if ! command -v protoc >/dev/null || ! command -v grpc_python_plugin >/dev/null; then continue; fi
			gen=(protoc -I/usr/include --grpc_out=generated "--plugin=protoc-gen-grpc=$(command -v grpc_python_plugin)")
			;;
		esac
		echo "(with $g)" >>"$out/stubs.log"
		if (cd "$copy/specification" && "${gen[@]}" -I. "-I$inc" --python_out=generated a2a.proto) >>"$out/stubs.log" 2>&1 &&
			patch_stubs && stubs_load; then
			made=$g
			break
		fi
	done
	[ -n "$made" ] || { cat "$out/stubs.log" >&2; die "the TCK's checked-in gRPC stubs do not load with this protobuf, and neither grpc_tools nor protoc with grpc_python_plugin remade ones that do"; }
	say "gRPC stubs remade from the TCK's a2a.proto ($made)"
fi
[ -s "$out/stubs.log" ] || rm -f "$out/stubs.log"

# a2abus, from this tree.
say "building a2abus from $root"
(cd "$root" && go build -o "$work/a2abus" ./cmd/a2abus)
url="http://127.0.0.1:$port"
serve=("$work/a2abus" serve --listen "127.0.0.1:$port" --grpc-listen "127.0.0.1:$((port + 1))" --nats-listen "127.0.0.1:$((port + 2))"
	--data-dir "$work/data" --agent tck --push true --push-allow-http true --push-allow-private true)
if getent hosts example.com >/dev/null; then
	"${serve[@]}" >"$out/a2abus.log" 2>&1 &
elif [ "$(id -u)" -ne 0 ]; then
	say "example.com does not resolve here, and mapping it needs root: the TCK's push-config tests will fail"
	"${serve[@]}" >"$out/a2abus.log" 2>&1 &
else
	{ cat /etc/hosts; echo "127.0.0.1 example.com"; } >"$work/hosts"
	say "example.com does not resolve here: serve runs with its own /etc/hosts mapping it to 127.0.0.1 (the TCK's push webhook host)"
	# shellcheck disable=SC2016 # the script's own parameters
	unshare -m --propagation private sh -c 'h=$1; shift; mount --bind "$h" /etc/hosts && exec "$@"' sh "$work/hosts" "${serve[@]}" >"$out/a2abus.log" 2>&1 &
fi
pid=$!
for _ in $(seq 300); do
	curl -sf "$url/.well-known/agent-card.json" >/dev/null && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
curl -sf "$url/.well-known/agent-card.json" >/dev/null || { tail -n 30 "$out/a2abus.log" >&2; die "a2abus serve did not come up"; }

{
	echo "date: $(date -u +%FT%TZ)"
	echo "a2abus: $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?') ($root)"
	echo "tck: $tckrev ($tck)"
	if [ "$mode" = chroot ]; then echo "python: the chroot $croot"; else echo "python: $(command -v python3)"; fi
	tckrun python3 -c '
import sys, importlib.metadata as m
print("python3", sys.version.split()[0])
for p in ("pytest", "httpx", "grpcio", "protobuf", "googleapis-common-protos", "jsonschema"):
    try:
        print(p, m.version(p))
    except Exception:
        print(p, "?")' 2>&1 || true
	echo "transports: $transports"
} >"$out/versions.txt"

args=(python3 -m pytest tests/compatibility/ "--sut-host=$url" --tb=short)
if [ "$transports" != all ]; then args+=("--transport=$transports"); fi
args+=(-v -rA "--compatibility-report=$tout/compatibility" "--junitxml=$tout/junitreport.xml" -p no:cacheprovider "$@")
rm -f "$out/junitreport.xml" "$out/compatibility.json" "$out/compatibility.html"
say "TCK: $tckrev"
say "running the TCK against $url (transports: $transports; about 3 minutes on 2 cores; follow it in $out/pytest.log)"
rc=0
tckrun "${args[@]}" >"$out/pytest.log" 2>&1 || rc=$?
alive=1
kill -0 "$pid" 2>/dev/null || alive=

# The failed tests (the short summary's FAILED and ERROR lines), each with
# the requirement id its junit message starts with.
grep -E '^=+ .+ in [0-9.]+s' "$out/pytest.log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//' >"$work/summary" || true
awk '/short test summary info/ {s = 1; next} s && /^(FAILED|ERROR) tests\// {print $2}' "$out/pytest.log" | sort -u >"$work/failed"
if [ -f "$out/junitreport.xml" ]; then
	awk 'BEGIN {RS = "<testcase "} NR > 1 {
		s = " " $0; c = ""; n = ""; r = ""
		if (!match(s, /<(failure|error) message="[^"]*"/)) next
		m = substr(s, RSTART, RLENGTH)
		if (match(m, /[A-Z][A-Z0-9_]*-[A-Z]+-[0-9]+/)) r = substr(m, RSTART, RLENGTH)
		if (match(s, / classname="[^"]*"/)) c = substr(s, RSTART + 12, RLENGTH - 13)
		if (match(s, / name="[^"]*"/)) n = substr(s, RSTART + 7, RLENGTH - 8)
		print c "\t" n "\t" r
	}' "$out/junitreport.xml" >"$work/reqs"
else
	: >"$work/reqs"
fi
awk -F '\t' 'NR == FNR {req[$1 "\t" $2] = $3; next} {
	k = split($0, p, "::"); cls = p[1]; sub(/\.py$/, "", cls); gsub(/\//, ".", cls)
	for (i = 2; i < k; i++) cls = cls "." p[i]
	r = req[cls "\t" p[k]]; print (r == "" ? "-" : r) "\t" $0
}' "$work/reqs" "$work/failed" >"$work/failures"

echo
echo "TCK summary: $(cat "$work/summary" 2>/dev/null || true)"
grep -m 1 'OVERALL COMPATIBILITY' "$out/pytest.log" | sed 's/^ */TCK /' || true
if [ -s "$work/failures" ]; then
	echo "failed:"
	awk -F '\t' '{printf "  %-16s %s\n", $1, $2}' "$work/failures"
fi
echo "reports in $out ($((SECONDS - t0)) s in all)"

status=0
if [ "$rc" -ge 2 ] || [ ! -s "$out/junitreport.xml" ]; then
	echo "tck.sh: the run did not complete (pytest exit status $rc); see $out/pytest.log" >&2
	status=3
elif [ -z "$alive" ]; then
	echo "tck.sh: a2abus serve exited during the run; its failures are not the TCK's verdict (see $out/a2abus.log)" >&2
	status=3
elif [ -n "${TCK_EXPECT_FAILURES:-}" ]; then
	read -r -d '' -a expect <<<"$TCK_EXPECT_FAILURES" || true
	declare -A seen=()
	unexpected=()
	while IFS=$'\t' read -r r id; do
		ok=
		for e in "${expect[@]}"; do
			if [ "$e" = "$id" ] || [ "$e" = "$r" ] || [[ $id == *"::$e" ]] || [[ $id == *"::${e}["*"]" ]]; then
				ok=1 seen["$e"]=1
			fi
		done
		[ -n "$ok" ] || unexpected+=("$id")
	done <"$work/failures"
	for e in "${expect[@]}"; do
		[ -n "${seen[$e]:-}" ] || echo "expected to fail, did not: $e"
	done
	if [ ${#unexpected[@]} -gt 0 ]; then
		echo "tck.sh: failed, not in TCK_EXPECT_FAILURES:" >&2
		printf '  %s\n' "${unexpected[@]}" >&2
		status=4
	fi
fi
exit "$status"
