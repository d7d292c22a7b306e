package relock

import "testing"

// TestMayWaitFollowsSingleMaster: on a Client of one master, whether a
// write may wait for replicas follows that master's state the moment a
// probe stores it, whatever the count kept for a cluster's masters says.
// A release that read a stale "may wait" would neither grant nor pass the
// lock on, though the probe had found no replica.
func TestMayWaitFollowsSingleMaster(t *testing.T) {
	s := &syncer{single: &syncNode{}}
	s.hasReplicas.Store(true) // as newSyncer leaves it until a recount
	if !s.mayWait() {
		t.Fatal("a master never read: mayWait is false, want true")
	}
	s.single.ready.Store(true)
	if s.mayWait() {
		t.Fatal("a master read with no replica: mayWait is true, want false")
	}
	s.single.replicas.Store(1)
	if !s.mayWait() {
		t.Fatal("a master read with a replica: mayWait is false, want true")
	}
}
