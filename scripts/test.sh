#!/usr/bin/env bash
# Runs relock's test suite. Installs what the tests need when it is missing
# (redis-server, redis-sentinel and redis-cli, and Chromium with its
# WebDriver for the web view's browser test, from Debian packages), then
# runs every package under the race detector. Extra arguments go to go test.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if ((${#missing[@]})); then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "installing ${missing[*]}"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed: $unformatted" >&2
	exit 1
fi
go vet ./...
# staticcheck from the module proxy, pinned; skipped only when it cannot be fetched.
if go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
else
	echo "staticcheck could not be fetched; skipping it" >&2
fi
go test -race -count=1 -timeout 12m ./... "$@"
