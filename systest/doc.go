// Package systest holds relock's whole-system suites: fault injection
// (servers paused, killed, restarted and failed over; networks cut and
// delayed; pub/sub connections killed; processes killed and stopped), the
// hammers of MultiLock, RWMutex and Election, and the soak. Every run is
// checked by the history checker (internal/history) and reported in the
// safety lines docs/safety.md collects. The behaviour tests of each
// primitive live beside its code in the repository's root; the tests
// every client library runs (the live reshard among them, whose test
// here calls it) in internal/conformance.
//
// The quick suite runs with the others (go test -race ./...); the soak
// repeats every scenario many more times:
//
//	RELOCK_SOAK=1 go test -race -count=1 -timeout 30m -run Fault -v ./systest
//
// Child processes are this test binary run with RELOCK_TEST_CHILD naming a
// role (main_test.go).
package systest
