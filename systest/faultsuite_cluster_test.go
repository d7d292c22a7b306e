package systest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultCluster runs on a cluster of its own (3 masters, one replica
// each), so that its failovers disturb no other test: pub/sub connections
// killed under contention, then rounds of a master killed with SIGKILL
// and failed over (CLUSTER FAILOVER FORCE), and of a master failed over
// gracefully (CLUSTER FAILOVER), while locks on every master are held and
// contended, with replica sync off and on. After each failover the locks
// of every slot range are granted again. Double grants after a kill are
// reported, not failed on, with sync off, and asserted absent with sync
// on; a graceful failover loses no write, so there every invariant is
// asserted in every mode.
func TestFaultCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, 3, 1)
	d := testkit.Deployment{Addrs: c.Addrs()}
	ctx := testkit.CtxTimeout(t, 10*time.Minute)

	t.Run("pubsub-killed", func(t *testing.T) {
		o, kills := pubsubStorm(t, mutexKind, d, c.KillPubSubClients, relock.WithoutReplicaSync())
		o.report(t, "pubsub-killed-cluster", 1, "sync", "off", "kills", kills)
	})

	const lease = 3 * time.Second
	modes := replicaSyncs()
	clients := make([][]*relock.Client, len(modes))
	for i, m := range modes {
		for range 2 {
			clients[i] = append(clients[i], d.Open(t, append([]relock.Option{relock.WithWatchdogTimeout(lease)}, m.opts...)...))
		}
	}
	n := testkit.Rounds(1, 4)
	kill, graceful := make([]outcome, len(modes)), make([]outcome, len(modes))
	for r := range n {
		victim := c.Masters[r%len(c.Masters)]
		outs := clusterPhase(t, c, modes, clients, func() {
			if err := victim.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := c.Failover(ctx, victim); err != nil {
				t.Fatal(err)
			}
			if err := victim.Restart(); err != nil { // it comes back as a replica
				t.Fatal(err)
			}
		})
		for i, o := range outs {
			if o.Stranded > 0 {
				t.Errorf("round %d, sync %s, kill: %d stranded waiters", r, modes[i].name, o.Stranded)
			}
			if modes[i].on {
				o.requireSafe(t, fmt.Sprintf("round %d, sync %s, kill", r, modes[i].name))
			}
			kill[i].add(o)
		}
		waitRejoined(t, c, victim)

		outs = clusterPhase(t, c, modes, clients, func() {
			if err := c.Failover(ctx, c.Masters[(r+1)%len(c.Masters)]); err != nil {
				t.Fatal(err)
			}
		})
		for i, o := range outs {
			o.requireSafe(t, fmt.Sprintf("round %d, sync %s, graceful failover", r, modes[i].name))
			graceful[i].add(o)
		}
	}
	for i, m := range modes {
		kill[i].report(t, "cluster-kill-failover", n, "sync", m.name, "lease", lease)
		graceful[i].report(t, "cluster-manual-failover", n, "sync", m.name, "lease", lease)
	}
}

// clusterPhase runs one workload per replica-sync mode on locks of every
// master: two held throughout by one holder each and waited for, two
// contended. Once every held lock is held it calls fault, then waits until
// every contended lock has been granted again, stops and returns the
// outcomes.
func clusterPhase(t *testing.T, c *redistest.Cluster, modes []replicaSync, clients [][]*relock.Client, fault func()) []outcome {
	t.Helper()
	ws := make([]*workload, len(modes))
	var hots, helds [][]string
	start := time.Now()
	for i, m := range modes {
		w := newWorkload(t, 60*time.Second)
		ws[i] = w
		hot, held := namesOnEveryMaster(t, c, "hot-"+m.name, 2), namesOnEveryMaster(t, c, "held-"+m.name, 2)
		hots, helds = append(hots, hot), append(helds, held)
		for k, cl := range clients[i] {
			for j := range 4 {
				w.contend(fmt.Sprintf("%s.c%d.hot%d", m.name, k, j), cl, hot, holdFor(time.Millisecond, 10*time.Millisecond))
			}
			w.contend(fmt.Sprintf("%s.c%d.poacher", m.name, k), cl, held, holdFor(time.Millisecond, 10*time.Millisecond))
		}
		for j, name := range held {
			w.contend(fmt.Sprintf("%s.c%d.holder%d", m.name, j%2, j), clients[i][j%2], []string{name}, forever)
		}
	}
	for i, w := range ws {
		w.progressed(helds[i], start, 60*time.Second)
	}
	fault()
	after := time.Now()
	out := make([]outcome, len(modes))
	for i, w := range ws {
		w.progressed(hots[i], after, 60*time.Second)
	}
	for i, w := range ws {
		w.stop(60 * time.Second)
		w.logNotes()
		out[i] = w.outcome()
	}
	return out
}

// namesOnEveryMaster returns perMaster lock names served by each master
// of the cluster, so that every slot range is exercised.
func namesOnEveryMaster(t *testing.T, c *redistest.Cluster, tag string, perMaster int) []string {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	rdb := testkit.CloseLater(t, c.Client())
	count := make(map[*redistest.Server]int)
	var out []string
	for len(out) < perMaster*len(c.Masters) {
		name := testkit.LockName(t) + ":" + tag
		slot, err := rdb.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.MasterForSlot(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		if count[m] < perMaster {
			count[m]++
			out = append(out, name)
		}
	}
	return out
}

// waitRejoined waits until a restarted node has joined the cluster as a
// replica with its link up and every node reports cluster_state:ok.
func waitRejoined(t *testing.T, c *redistest.Cluster, node *redistest.Server) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, node.Addr+" to rejoin as a replica", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		f, err := infoFields(ctx, node, "replication")
		if err != nil || f["role"] != "slave" || f["master_link_status"] != "up" {
			return false
		}
		for _, s := range c.Nodes {
			v, err := s.Do(ctx, "CLUSTER", "INFO")
			if err != nil || !containsLine(fmt.Sprint(v), "cluster_state:ok") {
				return false
			}
		}
		return true
	})
}
