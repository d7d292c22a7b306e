package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// AddMaster starts a new cluster-enabled node and replicas of it, joins
// them to the cluster the way redis-cli --cluster add-node does (CLUSTER
// MEET, then CLUSTER REPLICATE on each replica once it knows the master),
// and waits until every node knows them and the replicas' links are up.
// The new master serves no slot until one is migrated to it (MigrateSlot).
// It appends the nodes to Nodes, Masters and Replicas; do not read them
// concurrently with AddMaster.
func (c *Cluster) AddMaster(ctx context.Context, replicas int) (*Server, error) {
	if replicas < 0 {
		return nil, fmt.Errorf("redistest: negative replica count %d", replicas)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var seed *Server
	for _, s := range c.Nodes {
		if s.available() {
			seed = s
			break
		}
	}
	if seed == nil {
		return nil, errors.New("redistest: adding a master: no node is available")
	}
	var added []*Server
	for range 1 + replicas {
		s, err := Start(Options{Cluster: true})
		if err != nil {
			_ = closeAll(added)
			return nil, err
		}
		added = append(added, s)
	}
	fail := func(err error) (*Server, error) {
		_ = closeAll(added)
		return nil, err
	}
	for _, s := range added {
		id, err := commandString(ctx, s.Addr, "CLUSTER", "MYID")
		if err != nil {
			return fail(err)
		}
		c.ids[s] = id
		if _, err := command(ctx, s.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(seed.Port)); err != nil {
			return fail(fmt.Errorf("redistest: CLUSTER MEET from %s: %w", s.Addr, err))
		}
	}
	master := added[0]
	for _, r := range added[1:] {
		// A replica refuses a master it has not heard of yet by gossip.
		err := poll(ctx, clusterTimeout, r.Addr+" to replicate "+master.Addr, func(ctx context.Context) (bool, error) {
			_, err := command(ctx, r.Addr, "CLUSTER", "REPLICATE", c.ids[master])
			return err == nil, err
		})
		if err != nil {
			return fail(err)
		}
	}
	c.Nodes = append(c.Nodes, added...)
	err := c.waitStable(ctx, "new master "+master.Addr+" to join", func([]slotRange) error {
		for _, r := range added[1:] {
			if _, err := linkUp(ctx, r); err != nil {
				return fmt.Errorf("replica %s: %w", r.Addr, err)
			}
		}
		return nil
	})
	if err != nil {
		c.Nodes = c.Nodes[:len(c.Nodes)-len(added)]
		return fail(err)
	}
	c.Masters = append(c.Masters, master)
	c.Replicas = append(c.Replicas, added[1:]...)
	return master, nil
}
