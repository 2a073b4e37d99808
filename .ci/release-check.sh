#!/usr/bin/env bash
# Release check for dedupe: can a user `go get` every module of this tree?
#
#   bash .ci/release-check.sh
#       Publishes every module, from the files git tracks in the work tree, to a
#       local file module proxy at the version the modules require each other
#       with (.ci/modproxy checks that there is one, that no go.mod has a
#       replace directive and that go.work matches). Then, in a fresh module
#       outside the repository with GOWORK=off, `go get`s each module at that
#       version, lists every public package of every module with `go list`,
#       and builds and runs a program that imports them all.
#
#   bash .ci/release-check.sh tidy DIR...
#       Runs `go mod tidy` in each nested module DIR, in place, resolving the
#       other modules of this tree from the local proxy; they stay out of
#       go.sum (RELEASING.md).
#
#   bash .ci/release-check.sh test-isolated DIR... [-- GO_TEST_FLAGS...]
#       Runs `go vet ./...` and `go test -count=1 ./...` in each nested module
#       DIR with GOWORK=off, as a user's build sees it: the other modules of
#       this tree come from the same local proxy, not from the work tree. The
#       committed go.mod and go.sum are not touched (the go command works on
#       copies through -modfile).
#
# Both use a private module cache in a temporary directory, so a module of
# this tree is never cached at a version that names other contents. Third-party
# modules are read from the shared module cache through its download
# directory (a file proxy too), or from $(go env GOPROXY), and are verified
# against go.sum and the checksum database as usual; only the modules of this
# tree skip the checksum database (GONOSUMDB). Builds use -trimpath so that the
# build cache is shared across runs despite the changing module cache path.
# Exits non-zero with a message saying which step failed; removes its
# temporary directory on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

doing="starting"
step() {
	doing=$*
	printf -- '--- release-check [%ss]: %s\n' "$SECONDS" "$*"
}
fail() {
	printf 'release-check: FAIL: %s\n' "$*" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dedupe-release-check.XXXXXX")
finish() {
	rc=$?
	# -modcacherw leaves the private module cache writable; chmod only if not.
	rm -rf "$tmp" 2>/dev/null || { chmod -R u+w "$tmp" && rm -rf "$tmp"; } || true
	if [ "$rc" -ne 0 ]; then
		printf 'release-check: FAIL (exit %d) while: %s\n' "$rc" "$doing" >&2
	fi
	exit "$rc"
}
trap finish EXIT

# publish writes the local proxy and sets the environment every later go
# command runs in; it records "<path> <version> <dir>" per module in
# $tmp/modules.
publish() {
	step "vet and test .ci/modproxy"
	GOWORK=off go vet ./.ci/modproxy
	GOWORK=off go test -count=1 ./.ci/modproxy
	step "publish every module to a local file proxy"
	GOWORK=off go build -o "$tmp/modproxy" ./.ci/modproxy
	"$tmp/modproxy" -out "$tmp/proxy" >"$tmp/modules"
	version=$(awk 'NR == 1 { print $2 }' "$tmp/modules")
	sed 's/^/    /' "$tmp/modules"

	local shared
	upstream=$(go env GOPROXY)
	shared=$(go env GOMODCACHE)/cache/download
	export GOWORK=off
	export GOPROXY="file://$tmp/proxy,file://$shared,$upstream"
	export GOMODCACHE="$tmp/modcache"
	export GONOSUMDB="github.com/gatewaykit${GONOSUMDB:+,$GONOSUMDB}"
	export GOFLAGS="$(go env GOFLAGS) -trimpath -modcacherw"
	export GOTOOLCHAIN=local
}

# check is the user's view: a fresh module gets every module and imports
# every public package.
check() {
	publish
	local user="$tmp/user" paths pkgs n
	mkdir -p "$user"
	cd "$user"
	step "go mod init in a fresh module outside the repository"
	go mod init example.com/releasecheck 2>/dev/null
	paths=$(awk '{ print $1 }' "$tmp/modules")
	for p in $paths; do
		step "go get $p@$version"
		go get "$p@$version"
	done
	step "every module at $version"
	go list -m -f '{{.Path}} {{.Version}}' all | awk -v v="$version" '$1 ~ /^github.com\/gatewaykit\// && $2 != v { print; bad = 1 } END { exit bad }' ||
		fail "a module of this tree resolved to another version than $version (above)"

	step "list the public packages of every module"
	pkgs=$(go list -e -f '{{if or .GoFiles .CgoFiles}}{{.Name}} {{.ImportPath}}{{end}}' \
		$(sed 's|$|/...|' <<<"$paths") |
		awk '$1 != "main" && $2 !~ /(^|\/)internal(\/|$)/ { print $2 }' | sort -u)
	n=$(wc -l <<<"$pkgs")
	[ -n "$pkgs" ] || fail "go list found no public package"
	sed 's/^/    /' <<<"$pkgs"
	step "go get the $n public packages at $version"
	go get $(sed "s/\$/@$version/" <<<"$pkgs")

	step "build and run a program importing the $n public packages"
	{
		echo '// Command releasecheck imports every public package of dedupe.'
		echo 'package main'
		echo
		echo 'import ('
		echo '	"fmt"'
		echo
		sed 's/.*/	_ "&"/' <<<"$pkgs"
		echo ')'
		echo
		echo "func main() { fmt.Println(\"imported $n packages of $(wc -w <<<"$paths") modules at $version\") }"
	} >main.go
	gofmt -l main.go | grep -q . && fail "generated main.go is not gofmt-clean"
	go vet .
	go build -o "$tmp/releasecheck" .
	"$tmp/releasecheck"
	cd "$repo"
	doing="done"
	printf 'release-check: ok in %ss: every module at %s installs with go get and builds\n' "$SECONDS" "$version"
}

# test_isolated DIR... [-- FLAGS...] tests each nested module on its own.
test_isolated() {
	local dirs=() flags=() d work reqs
	while [ $# -gt 0 ]; do
		if [ "$1" = "--" ]; then
			shift
			flags=("$@")
			break
		fi
		dirs+=("$1")
		shift
	done
	nested_dirs test-isolated "${dirs[@]}"
	publish
	for d in "${dirs[@]}"; do
		d=${d%/}
		work="$tmp/isolated/$d"
		mkdir -p "$work"
		cp "$repo/$d/go.mod" "$work/go.mod"
		[ ! -f "$repo/$d/go.sum" ] || cp "$repo/$d/go.sum" "$work/go.sum"
		cd "$repo/$d"
		step "$d: checksums of the modules of this tree, from the local proxy"
		# -mod=mod records the go.mod checksums in the copy of go.sum; go get
		# records those of the modules' contents.
		go list -mod=mod -modfile="$work/go.mod" -m -f '{{.Path}}@{{.Version}}' all >"$work/buildlist"
		reqs=$(grep '^github.com/gatewaykit/.*@v' "$work/buildlist" || true)
		[ -z "$reqs" ] || go get -modfile="$work/go.mod" $reqs
		cmp -s "$repo/$d/go.mod" "$work/go.mod" ||
			fail "$d/go.mod: go get changed the requirements (diff $repo/$d/go.mod $work/go.mod); bring go.mod up to date"
		step "$d: go vet ./... (GOWORK=off)"
		go vet -modfile="$work/go.mod" ./...
		step "$d: go test -count=1 ${flags[*]:+${flags[*]} }./... (GOWORK=off)"
		go test -modfile="$work/go.mod" -count=1 "${flags[@]}" ./...
		cd "$repo"
	done
	doing="done"
	printf 'release-check: ok in %ss: %s tested on their own\n' "$SECONDS" "${dirs[*]}"
}

# tidy DIR... runs `go mod tidy` in each nested module, in place, against
# the local proxy and the upstream proxy only (the shared module cache lists
# only the versions it holds, so it would answer "latest" wrongly). The
# modules of this tree stay out of go.sum: their sums here would be those of
# the work tree, not of the tagged release.
tidy() {
	nested_dirs tidy "$@"
	publish
	GOPROXY="file://$tmp/proxy,$upstream"
	local d
	for d in "$@"; do
		d=${d%/}
		step "$d: go mod tidy (GOWORK=off)"
		(cd "$repo/$d" && go mod tidy)
		grep -v '^github\.com/gatewaykit/' "$repo/$d/go.sum" >"$tmp/go.sum" || true
		cat "$tmp/go.sum" >"$repo/$d/go.sum"
	done
	doing="done"
	printf 'release-check: ok in %ss: go mod tidy in %s\n' "$SECONDS" "$*"
}

# nested_dirs MODE DIR... checks that each DIR is a nested module directory.
nested_dirs() {
	local mode=$1 d
	shift
	[ $# -gt 0 ] || fail "$mode needs at least one module directory"
	for d in "$@"; do
		d=${d%/}
		[ -f "$repo/$d/go.mod" ] || fail "$d: no go.mod (want a module directory relative to the repository root)"
		[ "$d" != "." ] || fail "$mode is for the nested modules; the root module needs no proxy"
	done
}

case "${1:-check}" in
check) check ;;
test-isolated)
	shift
	test_isolated "$@"
	;;
tidy)
	shift
	tidy "$@"
	;;
*) fail "unknown mode ${1}; usage: release-check.sh [check | test-isolated DIR... [-- GO_TEST_FLAGS...] | tidy DIR...]" ;;
esac
