package redistest

import (
	"context"
	"fmt"
	"strconv"
)

// Migration is one hash slot on its way from one master to another, moved
// the way redis-cli --cluster reshard moves it: the target is told it
// imports the slot, the source that it migrates it, the keys go over by
// MIGRATE, and every master is told the slot's new owner. Between
// BeginMigration and Finish the slot is half-migrated: the source answers
// ASK for keys it no longer has, and the target TRYAGAIN for multi-key
// calls whose keys are not all there yet.
type Migration struct {
	c        *Cluster
	slot     int
	from, to *Server
}

// BeginMigration marks slot as importing on to and migrating on its
// current master, and moves none of its keys yet.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to *Server) (*Migration, error) {
	from, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("redistest: slot %d is served by %s already", slot, to.Addr)
	}
	c.mu.Lock()
	fromID, toID := c.ids[from], c.ids[to]
	c.mu.Unlock()
	if fromID == "" || toID == "" {
		return nil, fmt.Errorf("redistest: %s or %s is not a node of this cluster", from.Addr, to.Addr)
	}
	s := strconv.Itoa(slot)
	if _, err := command(ctx, to.Addr, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return nil, fmt.Errorf("redistest: SETSLOT %s IMPORTING on %s: %w", s, to.Addr, err)
	}
	if _, err := command(ctx, from.Addr, "CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return nil, fmt.Errorf("redistest: SETSLOT %s MIGRATING on %s: %w", s, from.Addr, err)
	}
	return &Migration{c: c, slot: slot, from: from, to: to}, nil
}

// MoveKeys migrates up to n of the slot's keys still on the source (all of
// them when n <= 0) and returns how many it moved.
func (m *Migration) MoveKeys(ctx context.Context, n int) (int, error) {
	moved := 0
	for n <= 0 || moved < n {
		batch := 100
		if n > 0 {
			batch = min(batch, n-moved)
		}
		v, err := command(ctx, m.from.Addr, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.slot), strconv.Itoa(batch))
		if err != nil {
			return moved, fmt.Errorf("redistest: GETKEYSINSLOT on %s: %w", m.from.Addr, err)
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			return moved, nil
		}
		args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(m.to.Port), "", "0", "5000", "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, fmt.Sprint(k))
		}
		if _, err := command(ctx, m.from.Addr, args...); err != nil {
			return moved, fmt.Errorf("redistest: MIGRATE from %s to %s: %w", m.from.Addr, m.to.Addr, err)
		}
		moved += len(keys)
	}
	return moved, nil
}

// Finish moves the keys left and gives the slot to the target on every
// master (the target first, then the source, as redis-cli does), then
// waits until every node agrees on the new map.
func (m *Migration) Finish(ctx context.Context) error {
	if _, err := m.MoveKeys(ctx, 0); err != nil {
		return err
	}
	m.c.mu.Lock()
	toID := m.c.ids[m.to]
	masters := append([]*Server(nil), m.c.Masters...)
	m.c.mu.Unlock()
	s := strconv.Itoa(m.slot)
	order := []*Server{m.to, m.from}
	for _, x := range masters {
		if x != m.to && x != m.from {
			order = append(order, x)
		}
	}
	for _, x := range order {
		if _, err := command(ctx, x.Addr, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			return fmt.Errorf("redistest: SETSLOT %s NODE on %s: %w", s, x.Addr, err)
		}
	}
	return m.c.waitStable(ctx, "slot "+s+" moved to "+m.to.Addr, func(view []slotRange) error {
		for _, r := range view {
			if m.slot >= r.start && m.slot <= r.end && r.master != m.to.Port {
				return fmt.Errorf("slot %s still served by port %d", s, r.master)
			}
		}
		return nil
	})
}

// MigrateSlot moves slot to the master to, keys and all (see Migration).
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server) error {
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}
