package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterTimeout bounds creating the cluster and each wait for it to
	// settle.
	clusterTimeout = 60 * time.Second
	// createAttempts is how often redis-cli --cluster create is tried.
	createAttempts = 3
	// manualFailoverRetry is how long Failover waits before asking again;
	// a manual failover that has not completed by then has been aborted by
	// the server (its own limit is 5 seconds).
	manualFailoverRetry = 6 * time.Second
)

// Cluster is a Redis Cluster of cluster-enabled nodes on loopback ports.
type Cluster struct {
	// Masters are the masters, ordered by the first slot they serve.
	// Failover swaps the promoted replica in.
	Masters []*Server
	// Replicas are the replicas, grouped in the order of their masters.
	// Failover swaps the demoted master in.
	Replicas []*Server
	// Nodes are all nodes in start order; only AddMaster appends to it.
	Nodes []*Server

	mu  sync.Mutex         // serialises Failover and its updates of Masters and Replicas
	ids map[*Server]string // cluster node IDs
}

// StartCluster starts masters*(1+replicasPerMaster) cluster-enabled nodes,
// creates the cluster with the server's command-line client (redis-cli
// --cluster create) and waits until every node reports cluster_state:ok
// with all slots assigned, all nodes agree on the slot map and every
// replica's link to its master is up. The client needs at least 3 masters.
func StartCluster(masters, replicasPerMaster int) (*Cluster, error) {
	p, err := require(true)
	if err != nil {
		return nil, err
	}
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	if replicasPerMaster < 0 {
		return nil, fmt.Errorf("redistest: negative replica count %d", replicasPerMaster)
	}
	c := &Cluster{ids: make(map[*Server]string)}
	total := masters * (1 + replicasPerMaster)
	for range total {
		s, err := Start(Options{Cluster: true})
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.create(ctx, p.cli, replicasPerMaster); err != nil {
		_ = c.Close()
		return nil, err
	}
	for _, s := range c.Nodes {
		id, err := commandString(ctx, s.Addr, "CLUSTER", "MYID")
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.ids[s] = id
	}
	var final []slotRange
	err = c.waitStable(ctx, "the cluster to form", func(view []slotRange) error {
		if len(masterPorts(view)) != masters {
			return fmt.Errorf("%d masters in slot map, want %d", len(masterPorts(view)), masters)
		}
		for _, r := range view {
			if len(r.replicas) != replicasPerMaster {
				return fmt.Errorf("slots %d-%d have %d replicas, want %d", r.start, r.end, len(r.replicas), replicasPerMaster)
			}
		}
		final = view
		return nil
	})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	seen := make(map[int]bool)
	for _, r := range final {
		if seen[r.master] {
			continue
		}
		seen[r.master] = true
		c.Masters = append(c.Masters, c.byPort(r.master))
		for _, p := range r.replicas {
			c.Replicas = append(c.Replicas, c.byPort(p))
		}
	}
	return c, nil
}

// create runs cli --cluster create, resetting the nodes and trying again
// if it fails.
func (c *Cluster) create(ctx context.Context, cli string, replicasPerMaster int) error {
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	var last error
	for attempt := 1; attempt <= createAttempts; attempt++ {
		if attempt > 1 {
			for _, s := range c.Nodes {
				if _, err := command(ctx, s.Addr, "CLUSTER", "RESET", "HARD"); err != nil {
					return fmt.Errorf("redistest: resetting %s after a failed cluster create: %w (create: %v)", s.Addr, err, last)
				}
			}
		}
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%s --cluster create: %w\n%s", cli, err, out)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("redistest: %w", last)
}

// Addrs returns the addresses of all nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a new go-redis cluster client seeded with every node. The
// caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// KillPubSubClients runs Server.KillPubSubClients on every node that is
// running and not paused, and returns the total.
func (c *Cluster) KillPubSubClients(ctx context.Context) (int, error) {
	total := 0
	var errs []error
	for _, s := range c.Nodes {
		if !s.available() {
			continue
		}
		n, err := s.KillPubSubClients(ctx)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// MasterForSlot returns the node serving slot, according to the first
// available node that answers CLUSTER SLOTS.
func (c *Cluster) MasterForSlot(ctx context.Context, slot int) (*Server, error) {
	if slot < 0 || slot >= clusterSlots {
		return nil, fmt.Errorf("redistest: slot %d out of range", slot)
	}
	var last error = errors.New("no node is available")
	for _, s := range c.Nodes {
		if !s.available() {
			continue
		}
		view, err := slotMap(ctx, s.Addr)
		if err != nil {
			last = err
			continue
		}
		for _, r := range view {
			if slot >= r.start && slot <= r.end {
				if m := c.byPort(r.master); m != nil {
					return m, nil
				}
				return nil, fmt.Errorf("redistest: slot %d served by unknown port %d", slot, r.master)
			}
		}
		return nil, fmt.Errorf("redistest: slot %d is not assigned according to %s", slot, s.Addr)
	}
	return nil, fmt.Errorf("redistest: master for slot %d: %w", slot, last)
}

// Failover promotes a replica of master with CLUSTER FAILOVER (FORCE when
// master is down or paused) and waits until the replica serves master's
// slots on every available node, every available node reports
// cluster_state:ok and, if master is running, master has become a replica
// with its link up. Masters and Replicas are updated accordingly; do not
// read them concurrently with Failover. Without a deadline in ctx it waits
// at most a minute.
func (c *Cluster) Failover(ctx context.Context, master *Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	masterID, ok := c.ids[master]
	if !ok {
		return fmt.Errorf("redistest: %v is not a node of this cluster", master)
	}
	replica, err := c.replicaOf(ctx, masterID)
	if err != nil {
		return err
	}
	failover := []string{"CLUSTER", "FAILOVER"}
	if !master.available() {
		failover = append(failover, "FORCE")
	}
	send := func(ctx context.Context) error {
		_, err := command(ctx, replica.Addr, failover...)
		return err
	}
	if err := send(ctx); err != nil {
		// A replica that the cluster promoted on its own meanwhile refuses
		// the command; the wait below checks the outcome either way.
		var re replyError
		if !errors.As(err, &re) || !strings.Contains(string(re), "replica") {
			return fmt.Errorf("redistest: %s on %s: %w", strings.Join(failover, " "), replica.Addr, err)
		}
	}
	sent := time.Now()

	err = c.waitStable(ctx, "failover of "+master.Addr+" to "+replica.Addr, func(view []slotRange) error {
		owns := false
		for _, r := range view {
			if r.master == master.Port {
				if time.Since(sent) > manualFailoverRetry {
					sent = time.Now()
					if err := send(ctx); err != nil {
						return err
					}
				}
				return fmt.Errorf("%s still serves slots %d-%d", master.Addr, r.start, r.end)
			}
			owns = owns || r.master == replica.Port
		}
		if !owns {
			return fmt.Errorf("%s serves no slots", replica.Addr)
		}
		if master.available() {
			if _, err := linkUp(ctx, master); err != nil {
				return fmt.Errorf("old master %s: %w", master.Addr, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, s := range c.Masters {
		if s == master {
			c.Masters[i] = replica
		}
	}
	for i, s := range c.Replicas {
		if s == replica {
			c.Replicas[i] = master
		}
	}
	return nil
}

// replicaOf returns an available replica of the master with the given ID.
func (c *Cluster) replicaOf(ctx context.Context, masterID string) (*Server, error) {
	var last error = errors.New("no node is available")
	for _, s := range c.Nodes {
		if !s.available() {
			continue
		}
		nodes, err := clusterNodes(ctx, s.Addr)
		if err != nil {
			last = err
			continue
		}
		for _, n := range nodes {
			if n.masterID != masterID || n.failed {
				continue
			}
			if r := c.byPort(n.port); r != nil && r.available() {
				return r, nil
			}
		}
		return nil, fmt.Errorf("redistest: no available replica of node %s", masterID)
	}
	return nil, fmt.Errorf("redistest: finding a replica: %w", last)
}

// waitStable waits until every available node reports cluster_state:ok
// with all slots served, all available nodes return the same slot map,
// every available replica in it has its link up and check accepts the map.
func (c *Cluster) waitStable(ctx context.Context, what string, check func([]slotRange) error) error {
	return poll(ctx, clusterTimeout, what, func(ctx context.Context) (bool, error) {
		var view []slotRange
		var viewFrom string
		for _, s := range c.Nodes {
			if !s.available() {
				continue
			}
			fields, err := clusterInfo(ctx, s.Addr)
			if err != nil {
				return false, err
			}
			if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != strconv.Itoa(clusterSlots) {
				return false, fmt.Errorf("%s: cluster_state:%s cluster_slots_ok:%s",
					s.Addr, fields["cluster_state"], fields["cluster_slots_ok"])
			}
			if fields["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes)) {
				return false, fmt.Errorf("%s: cluster_known_nodes:%s", s.Addr, fields["cluster_known_nodes"])
			}
			v, err := slotMap(ctx, s.Addr)
			if err != nil {
				return false, err
			}
			if view == nil {
				view, viewFrom = v, s.Addr
			} else if !sameSlotMap(view, v) {
				return false, fmt.Errorf("slot maps of %s and %s differ", viewFrom, s.Addr)
			}
		}
		if view == nil {
			return false, errors.New("no node is available")
		}
		if covered(view) != clusterSlots {
			return false, fmt.Errorf("slot map covers %d slots", covered(view))
		}
		for _, r := range view {
			for _, p := range r.replicas {
				if rep := c.byPort(p); rep != nil && rep.available() {
					if _, err := linkUp(ctx, rep); err != nil {
						return false, fmt.Errorf("replica %s: %w", rep.Addr, err)
					}
				}
			}
		}
		if err := check(view); err != nil {
			return false, err
		}
		return true, nil
	})
}

// byPort returns the node listening on port, or nil.
func (c *Cluster) byPort(port int) *Server {
	for _, s := range c.Nodes {
		if s.Port == port {
			return s
		}
	}
	return nil
}

// Close closes every node.
func (c *Cluster) Close() error {
	return closeAll(c.Nodes)
}
