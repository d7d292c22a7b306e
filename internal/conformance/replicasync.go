package conformance

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// ReplicaSyncSameConnection: with replica sync on (the default where the
// master has replicas), each acquisition's WAIT goes out on the
// connection that sent the acquisition, as the server sees it (MONITOR
// names each command's connection): a WAIT on another connection would
// wait for nothing. Sixteen goroutines lock at once, so that the client
// library's pipelines and its pool of connections are both in play; each
// lock is on the replica when Lock returns. On one master with a replica,
// and on the shared cluster.
func ReplicaSyncSameConnection(t *testing.T) {
	t.Run("replicated", func(t *testing.T) {
		t.Parallel()
		r := redistest.NewReplicated(t, 1)
		testkit.WaitReplicasOnline(t, r.Master, 1)
		c := testkit.Deployment{Addr: r.Master.Addr}.Open(t)
		lockSynced(t, c, syncedNames(testkit.LockName(t)), []*redistest.Server{r.Master}, r.Replicas[0])
	})
	t.Run("cluster", func(t *testing.T) {
		for _, m := range testkit.Cluster.Masters {
			testkit.WaitReplicasOnline(t, m, 1)
		}
		c := testkit.Topologies()[1].Deployment.Open(t)
		lockSynced(t, c, syncedNames(testkit.LockName(t)), testkit.Cluster.Masters, nil)
	})
}

// syncedNames are the names of lockSynced's workers, one each. Hash tags
// spread them over a cluster's masters.
func syncedNames(base string) []string {
	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("%s:{%d}", base, i))
	}
	return names
}

// lockSynced runs the acquisitions of ReplicaSyncSameConnection with c,
// a goroutine for each of names, watching masters, and checks each lock is
// on replica (if given) when Lock returns, and that masters saw every
// acquisition.
func lockSynced(t *testing.T, c *relock.Client, names []string, masters []*redistest.Server, replica *redistest.Server) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	var mons []*monitor
	for _, m := range masters {
		mons = append(mons, startMonitor(t, m.Addr))
	}
	const rounds = 5
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(name)
			for range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if replica != nil {
					if n, err := replica.Do(ctx, "EXISTS", name); err != nil || n != int64(1) {
						t.Errorf("lock %s not on the replica when Lock returned: %v, %v", name, n, err)
					}
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Lock scripts, by connection: each followed by a WAIT on its own.
	calls, waited := 0, 0
	for _, mon := range mons {
		for conn, cmds := range mon.stop() {
			for i, cmd := range cmds {
				if !isLockCall(cmd, names) {
					continue
				}
				calls++
				if !waitAfter(cmds[i+1:]) {
					t.Errorf("lock call on %s with no WAIT after it on that connection: %.120s", conn, cmd)
					continue
				}
				waited++
			}
		}
	}
	if calls < len(names)*rounds {
		t.Fatalf("the servers saw %d lock calls of %d", calls, len(names)*rounds)
	}
	t.Logf("%d lock calls, %d followed by a WAIT on their connection", calls, waited)
}

// isLockCall reports whether cmd, a MONITOR line's arguments, runs the
// lock script on one of names.
func isLockCall(cmd string, names []string) bool {
	sha := `"evalsha" "` + testkit.ScriptSHA("lock.lua") + `"`
	if !strings.HasPrefix(cmd, sha) && !strings.HasPrefix(cmd, `"eval" "-- lock.lua`) {
		return false
	}
	for _, n := range names {
		if strings.Contains(cmd, `"`+n+`"`) {
			return true
		}
	}
	return false
}

// waitAfter reports whether a WAIT is among cmds.
func waitAfter(cmds []string) bool {
	for _, c := range cmds {
		if strings.HasPrefix(c, `"wait" `) {
			return true
		}
	}
	return false
}

// monitor records what a server's MONITOR reports, by the connection
// each command came on.
type monitor struct {
	conn  net.Conn
	done  chan struct{}
	mu    sync.Mutex
	byCon map[string][]string
}

// startMonitor starts MONITOR on the server at addr; its record is read
// by stop, which the test's end also calls.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: conn, done: make(chan struct{}), byCon: map[string][]string{}}
	r := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR answered %q, %v", line, err)
	}
	_ = conn.SetDeadline(time.Time{})
	go m.read(r)
	t.Cleanup(func() { m.stop() })
	return m
}

// read records lines of the form
// +<time> [<db> <client address>] "command" "arg" ...
// leaving out the commands scripts run (whose client is "lua").
func (m *monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
		if open < 0 || end < open {
			continue
		}
		who := strings.Fields(line[open+1 : end])
		if len(who) != 2 || who[1] == "lua" {
			continue
		}
		m.mu.Lock()
		m.byCon[who[1]] = append(m.byCon[who[1]], strings.TrimSpace(line[end+1:]))
		m.mu.Unlock()
	}
}

// stop ends MONITOR and returns the commands seen, by connection.
func (m *monitor) stop() map[string][]string {
	_ = m.conn.Close()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byCon
}

// ClusterNewMaster: a master that joins the cluster after the Client
// learned the cluster's map, and takes slots by migration, serves their
// locks with replica sync as the first masters do: every acquisition
// reaches it, each followed by a WAIT on the connection that sent it.
func ClusterNewMaster(t *testing.T) {
	t.Parallel()
	cluster := redistest.NewCluster(t, 3, 1)
	ctx := testkit.CtxTimeout(t, 2*time.Minute)
	c := testkit.Deployment{Addrs: cluster.Addrs()}.Open(t)
	names := syncedNames(testkit.LockName(t))
	for _, name := range names {
		// The Client reaches each name's master of the first map.
		l, err := c.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cluster.AddMaster(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitReplicasOnline(t, m, 1)
	for _, name := range names {
		if err := cluster.MigrateSlot(ctx, slots.Of(name), m); err != nil {
			t.Fatal(err)
		}
	}
	lockSynced(t, c, names, []*redistest.Server{m}, nil)
}
