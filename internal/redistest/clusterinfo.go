package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// slotRange is one entry of CLUSTER SLOTS: a range of slots with the ports
// of its master and of its replicas that are not marked as failed.
type slotRange struct {
	start, end int
	master     int
	replicas   []int // sorted
}

// slotMap returns the sorted CLUSTER SLOTS view of the node at addr.
func slotMap(ctx context.Context, addr string) ([]slotRange, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, err := command(ctx, addr, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s CLUSTER SLOTS: unexpected reply %v", addr, v)
	}
	view := make([]slotRange, 0, len(entries))
	for _, e := range entries {
		fields, _ := e.([]any)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s CLUSTER SLOTS: unexpected entry %v", addr, e)
		}
		start, _ := fields[0].(int64)
		end, _ := fields[1].(int64)
		r := slotRange{start: int(start), end: int(end)}
		for i, n := range fields[2:] {
			node, _ := n.([]any)
			if len(node) < 2 {
				return nil, fmt.Errorf("%s CLUSTER SLOTS: unexpected node %v", addr, n)
			}
			port, _ := node[1].(int64)
			if i == 0 {
				r.master = int(port)
			} else {
				r.replicas = append(r.replicas, int(port))
			}
		}
		slices.Sort(r.replicas)
		view = append(view, r)
	}
	slices.SortFunc(view, func(a, b slotRange) int { return a.start - b.start })
	return view, nil
}

// sameSlotMap reports whether two sorted slot maps are equal.
func sameSlotMap(a, b []slotRange) bool {
	return slices.EqualFunc(a, b, func(x, y slotRange) bool {
		return x.start == y.start && x.end == y.end && x.master == y.master && slices.Equal(x.replicas, y.replicas)
	})
}

// covered counts the slots of a slot map.
func covered(view []slotRange) int {
	n := 0
	for _, r := range view {
		n += r.end - r.start + 1
	}
	return n
}

// masterPorts returns the distinct master ports of a slot map.
func masterPorts(view []slotRange) []int {
	var ports []int
	for _, r := range view {
		if !slices.Contains(ports, r.master) {
			ports = append(ports, r.master)
		}
	}
	return ports
}

// clusterInfo returns the fields of CLUSTER INFO.
func clusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := commandString(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	return parseFields(s, ':'), nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id       string
	port     int
	masterID string // "" for masters
	failed   bool
}

// clusterNodes parses CLUSTER NODES of the node at addr.
func clusterNodes(ctx context.Context, addr string) ([]clusterNode, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := commandString(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%s CLUSTER NODES: unexpected line %q", addr, line)
		}
		// The address is ip:port@busport[,hostname].
		hostPort, _, _ := strings.Cut(f[1], "@")
		i := strings.LastIndexByte(hostPort, ':')
		port, err := strconv.Atoi(hostPort[i+1:])
		if err != nil {
			return nil, fmt.Errorf("%s CLUSTER NODES: bad address in %q", addr, line)
		}
		n := clusterNode{id: f[0], port: port}
		if f[3] != "-" {
			n.masterID = f[3]
		}
		for _, flag := range strings.Split(f[2], ",") {
			if flag == "fail" || flag == "fail?" {
				n.failed = true
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
