package conformance

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
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
		lockSynced(t, testkit.Deployment{Addr: r.Master.Addr}, []*redistest.Server{r.Master}, r.Replicas[0])
	})
	t.Run("cluster", func(t *testing.T) {
		for _, m := range testkit.Cluster.Masters {
			testkit.WaitReplicasOnline(t, m, 1)
		}
		lockSynced(t, testkit.Topologies()[1].Deployment, testkit.Cluster.Masters, nil)
	})
}

// lockSynced runs the acquisitions of ReplicaSyncSameConnection on d,
// watching masters, and checks each lock is on replica (if given) when
// Lock returns.
func lockSynced(t *testing.T, d testkit.Deployment, masters []*redistest.Server, replica *redistest.Server) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	var mons []*monitor
	for _, m := range masters {
		mons = append(mons, startMonitor(t, m.Addr))
	}
	c := d.Open(t)
	base := testkit.LockName(t)
	const workers, rounds = 16, 5
	var wg sync.WaitGroup
	var names []string
	for i := range workers {
		// Hash tags spread the names over the cluster's masters.
		name := fmt.Sprintf("%s:{%d}", base, i)
		names = append(names, name)
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
	if calls < workers*rounds {
		t.Fatalf("the servers saw %d lock calls of %d", calls, workers*rounds)
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
