#!/usr/bin/env bash
# Runs relock's test suite, and those of its modules (gocronlock and the
# client adapters relockrueidis and relockvalkey), on Redis and then on
# Valkey. Installs what the tests need when it is missing,
# from Debian packages: redis-server, redis-sentinel and redis-cli;
# valkey-server and valkey-cli (Valkey 8.0 from bookworm-backports on
# Debian 12, whose suite is added to apt's sources when it is not there);
# and Chromium with its WebDriver for the web view's browser test. Extra
# arguments go to every go test run.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
valkey=()
if ! command -v valkey-server >/dev/null 2>&1 || ! command -v valkey-cli >/dev/null 2>&1; then
	# Sentinels run as valkey-server --sentinel, so valkey-sentinel is not needed.
	valkey=(valkey-server valkey-tools)
	# Debian 12 carries Valkey in bookworm-backports only; later releases
	# carry it in their main suite.
	if grep -qs '^VERSION_CODENAME=bookworm$' /etc/os-release; then
		valkey=(-t bookworm-backports "${valkey[@]}")
		if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
			echo "adding bookworm-backports to apt's sources"
			echo 'deb http://deb.debian.org/debian bookworm-backports main' |
				$sudo tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
		fi
	fi
fi
if ((${#missing[@]} + ${#valkey[@]})); then
	$sudo apt-get update -qq
fi
if ((${#missing[@]})); then
	echo "installing ${missing[*]}"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ((${#valkey[@]})); then
	echo "installing ${valkey[*]}"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${valkey[@]}" >/dev/null
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed: $unformatted" >&2
	exit 1
fi
# The gocron adapters and the client adapters are modules of their own
# (each with its go.mod), which the root's ./... does not reach. The client
# adapters' tests run the library's shared contract and fault suite
# (internal/conformance) on their client, about 30s each per server.
modules=(gocronlock relockrueidis relockvalkey)
go vet ./...
for m in "${modules[@]}"; do (cd "$m" && go vet ./...); done
# staticcheck from the module proxy, pinned; skipped only when it cannot be fetched.
if go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	for m in "${modules[@]}"; do (cd "$m" && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...); done
else
	echo "staticcheck could not be fetched; skipping it" >&2
fi

# The tests start the servers RELOCK_TEST_SERVER names (internal/redistest).
# Both runs go ahead even when the first fails; the script fails if either did.
status=0
echo "--- tests on $(redis-server --version | cut -d' ' -f1-3)"
RELOCK_TEST_SERVER=redis go test -race -count=1 -timeout 12m ./... "$@" || status=1
# relockvalkey runs on Valkey only: its code is relockrueidis's with the
# names swapped (its TestSameAsRueidisAdapter checks it), and rueidis runs
# on both servers.
for m in "${modules[@]}"; do
	[ "$m" = relockvalkey ] && continue
	(cd "$m" && RELOCK_TEST_SERVER=redis go test -race -count=1 -timeout 5m ./... "$@") || status=1
done
# On Valkey, every package but internal/cli: the relock command reaches the
# server only through the library, whose tests run here, and its browser
# test checks the web page in Chromium, not the server.
echo "--- tests on $(valkey-server --version | cut -d' ' -f1-3)"
RELOCK_TEST_SERVER=valkey go test -race -count=1 -timeout 12m \
	$(go list ./... | grep -v '/internal/cli$') "$@" || status=1
for m in "${modules[@]}"; do
	(cd "$m" && RELOCK_TEST_SERVER=valkey go test -race -count=1 -timeout 5m ./... "$@") || status=1
done
exit $status
