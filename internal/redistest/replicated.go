package redistest

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// replicationTimeout bounds the wait for replicas to finish their first
// synchronisation.
const replicationTimeout = 30 * time.Second

// Replicated is a master with replicas using plain replication (no
// sentinel, no cluster).
type Replicated struct {
	// Master is the master.
	Master *Server
	// Replicas replicate Master.
	Replicas []*Server
}

// StartReplicated starts a master and the given number of replicas and
// waits until every replica reports master_link_status:up and the master
// counts them all as connected.
func StartReplicated(replicas int) (*Replicated, error) {
	if replicas < 0 {
		return nil, fmt.Errorf("redistest: negative replica count %d", replicas)
	}
	master, err := Start(Options{})
	if err != nil {
		return nil, err
	}
	r := &Replicated{Master: master}
	for range replicas {
		s, err := Start(Options{ReplicaOf: master.Addr})
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		r.Replicas = append(r.Replicas, s)
	}
	if err := waitReplication(context.Background(), master, r.Replicas); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// Servers returns the master followed by the replicas.
func (r *Replicated) Servers() []*Server {
	return append([]*Server{r.Master}, r.Replicas...)
}

// Close closes the replicas and the master.
func (r *Replicated) Close() error {
	return closeAll(append(append([]*Server(nil), r.Replicas...), r.Master))
}

// waitReplication waits until each replica's link to master is up and the
// master lists them all as online.
func waitReplication(ctx context.Context, master *Server, replicas []*Server) error {
	for _, rep := range replicas {
		err := poll(ctx, replicationTimeout, "replica "+rep.Addr+" to sync with "+master.Addr,
			func(ctx context.Context) (bool, error) { return linkUp(ctx, rep) })
		if err != nil {
			return err
		}
	}
	return poll(ctx, replicationTimeout, "master "+master.Addr+" to see its replicas",
		func(ctx context.Context) (bool, error) {
			fields, err := infoShort(ctx, master.Addr, "replication")
			if err != nil {
				return false, err
			}
			n, _ := strconv.Atoi(fields["connected_slaves"])
			if n < len(replicas) {
				return false, fmt.Errorf("connected_slaves:%d", n)
			}
			return true, nil
		})
}

// linkUp reports whether the replica's link to its master is up.
func linkUp(ctx context.Context, replica *Server) (bool, error) {
	fields, err := infoShort(ctx, replica.Addr, "replication")
	if err != nil {
		return false, err
	}
	if fields["role"] != "slave" || fields["master_link_status"] != "up" {
		return false, fmt.Errorf("role:%s master_link_status:%s", fields["role"], fields["master_link_status"])
	}
	return true, nil
}

// infoShort runs INFO with a one-second limit, for use inside polls.
func infoShort(ctx context.Context, addr string, section ...string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return info(ctx, addr, section...)
}
