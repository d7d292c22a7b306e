// Package conformance is relock's contract and fault suite for a Redis
// client library: every primitive, pub/sub wake-ups and grants, batching
// under many goroutines, replica-synced acquisition, Sentinel, Cluster
// with a live reshard, and the faults where the client library matters.
// A module that puts a client library behind relock's door runs it the
// way database drivers run a shared suite:
//
//	func TestMain(m *testing.M) { os.Exit(conformance.Main(m, open)) }
//
//	func TestConformance(t *testing.T) { conformance.Run(t) }
//
// where open is the module's testkit.Opener. The tests are the bodies of
// relock's own tests, which run them on go-redis under their own names.
package conformance

import (
	"testing"

	"github.com/relock-go/relock/internal/testkit"
)

// Main sets open as the client library of every Client the tests make,
// then starts the shared servers, runs the tests and checks for leaked
// goroutines (testkit.Main). A TestMain returns its result to os.Exit.
func Main(m *testing.M, open testkit.Opener) int {
	testkit.SetOpener(open)
	return testkit.Main(m)
}

// tests are the suite, in the order Run runs them. Those that start
// servers of their own run in parallel with the rest; those that disturb
// the shared servers (pub/sub connections killed) run alone.
var tests = []struct {
	name string
	run  func(t *testing.T)
}{
	// The Mutex: contract, batching, waking, grants, loss, fencing.
	{"MutexHammer", MutexHammer},
	{"Reentrancy", Reentrancy},
	{"TryLockAndTTL", TryLockAndTTL},
	{"FencingTokensGrow", FencingTokensGrow},
	{"FixedLeaseExpires", FixedLeaseExpires},
	{"LeaseContext", LeaseContext},
	{"Grants", Grants},
	{"LossSignalled", LossSignalled},
	{"CancelledWaiterLeavesNothing", CancelledWaiterLeavesNothing},
	{"WaiterWokenByRelease", WaiterWokenByRelease},
	// A server's error reply, through the driver, read as its class.
	{"QueueOfAnotherType", QueueOfAnotherType},
	// The other primitives.
	{"FairMutexOrder", FairMutexOrder},
	{"FairMutexHammer", FairMutexHammer},
	{"RWMutexReadersShare", RWMutexReadersShare},
	{"RWMutexWriterExcludes", RWMutexWriterExcludes},
	{"MultiLock", MultiLock},
	{"RedLockQuorum", RedLockQuorum},
	{"RedLockWaits", RedLockWaits},
	{"SemaphoreHammer", SemaphoreHammer},
	{"SemaphoreWakesWhatFits", SemaphoreWakesWhatFits},
	{"PermitSemaphoreHammer", PermitSemaphoreHammer},
	{"PermitLeaseExpires", PermitLeaseExpires},
	{"LatchReleasesAll", LatchReleasesAll},
	{"ElectionCampaignResign", ElectionCampaignResign},
	{"ElectionObserve", ElectionObserve},
	{"ElectionObserveReconnect", ElectionObserveReconnect},
	{"ElectionLoss", ElectionLoss},
	// Topologies and faults, each on servers of its own.
	{"ReplicaSyncSameConnection", ReplicaSyncSameConnection},
	{"ClusterNewMaster", ClusterNewMaster},
	{"Sentinel", Sentinel},
	{"FaultClusterResharding", FaultClusterResharding},
	{"RedisRestarted", RedisRestarted},
	{"PubSubKilled", PubSubKilled},
	{"CloseWithServerPaused", CloseWithServerPaused},
}

// Run runs the suite, each test as a subtest of t named as above, on the
// client library the test binary's TestMain chose (see Main).
func Run(t *testing.T) {
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}
