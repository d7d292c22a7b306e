package redistest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelMasterName is the name under which the sentinels monitor the
	// master.
	sentinelMasterName = "mymaster"
	// sentinelCount is the number of sentinel processes.
	sentinelCount = 3
	// sentinelReplicas is the number of replicas in a sentinel group.
	sentinelReplicas = 2
	// sentinelQuorum is the number of sentinels that must agree the master
	// is down.
	sentinelQuorum = 2
	// sentinelTimeout bounds the waits of this file.
	sentinelTimeout = 30 * time.Second
)

// Sentinel is a master with two replicas watched by three sentinels
// (quorum 2, down-after-milliseconds 2000, failover-timeout 3000).
//
// Down-after is twice the sentinels' ping period (a second). With the two
// equal, on a busy machine a sentinel sometimes marked the master it had
// just switched to down a second after the switch, and objectively down
// at the same moment: a second failover, promoting a replica that may
// have missed the first new master's writes.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the group under.
	MasterName string
	// Master is the initial master. After a failover it may be a replica
	// or down; use CurrentMaster for the current one.
	Master *Server
	// Replicas are the initial replicas.
	Replicas []*Server
	// Sentinels are the sentinel processes.
	Sentinels []*Server
}

// StartSentinel starts a master, two replicas and three sentinels, and
// waits until every sentinel knows the master, both replicas (with their
// link to the master up) and the two other sentinels.
func StartSentinel() (*Sentinel, error) {
	rep, err := StartReplicated(sentinelReplicas)
	if err != nil {
		return nil, err
	}
	s := &Sentinel{MasterName: sentinelMasterName, Master: rep.Master, Replicas: rep.Replicas}
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s 2000\n"+
		"sentinel failover-timeout %[1]s 3000\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		s.MasterName, s.Master.Port, sentinelQuorum)
	for range sentinelCount {
		sen, err := startServer(&Server{kind: kindSentinel, sentinelConf: conf})
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, sen)
	}
	for _, sen := range s.Sentinels {
		err := poll(context.Background(), sentinelTimeout, "sentinel "+sen.Addr+" to discover the group",
			func(ctx context.Context) (bool, error) { return s.sentinelReady(ctx, sen) })
		if err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// sentinelReady reports whether sen sees a healthy master, all replicas
// with their link up and all other sentinels.
func (s *Sentinel) sentinelReady(ctx context.Context, sen *Server) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, err := command(ctx, sen.Addr, "SENTINEL", "MASTER", s.MasterName)
	if err != nil {
		return false, err
	}
	m := pairs(v)
	if m["flags"] != "master" || m["num-slaves"] != strconv.Itoa(len(s.Replicas)) ||
		m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) {
		return false, fmt.Errorf("master flags:%s num-slaves:%s num-other-sentinels:%s",
			m["flags"], m["num-slaves"], m["num-other-sentinels"])
	}
	v, err = command(ctx, sen.Addr, "SENTINEL", "REPLICAS", s.MasterName)
	if err != nil {
		return false, err
	}
	list, _ := v.([]any)
	for _, r := range list {
		rm := pairs(r)
		if rm["flags"] != "slave" || rm["master-link-status"] != "ok" {
			return false, fmt.Errorf("replica %s flags:%s master-link-status:%s",
				rm["name"], rm["flags"], rm["master-link-status"])
		}
	}
	return true, nil
}

// SentinelAddrs returns the addresses of the sentinel processes.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sen := range s.Sentinels {
		addrs[i] = sen.Addr
	}
	return addrs
}

// Servers returns the data servers: the initial master followed by the
// initial replicas.
func (s *Sentinel) Servers() []*Server {
	return append([]*Server{s.Master}, s.Replicas...)
}

// FailoverClient returns a new sentinel-backed go-redis client for the
// group. The caller closes it.
func (s *Sentinel) FailoverClient() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: s.SentinelAddrs(),
	})
}

// CurrentMaster asks the sentinels (the first one that answers) for the
// master's address and returns the matching Server.
func (s *Sentinel) CurrentMaster(ctx context.Context) (*Server, error) {
	var last error
	for _, sen := range s.Sentinels {
		if !sen.available() {
			continue
		}
		m, err := s.masterSeenBy(ctx, sen)
		if err == nil {
			return m, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("no sentinel is running")
	}
	return nil, fmt.Errorf("redistest: current master: %w", last)
}

// masterSeenBy returns the master according to one sentinel.
func (s *Sentinel) masterSeenBy(ctx context.Context, sen *Server) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, err := command(ctx, sen.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	if len(list) != 2 {
		return nil, fmt.Errorf("sentinel %s: unexpected reply %v", sen.Addr, v)
	}
	port, _ := strconv.Atoi(fmt.Sprint(list[1]))
	for _, srv := range s.Servers() {
		if srv.Port == port {
			return srv, nil
		}
	}
	return nil, fmt.Errorf("sentinel %s reports unknown master %v:%v", sen.Addr, list[0], list[1])
}

// WaitForNewMaster waits until every running sentinel names the same
// master, that master is not old and it reports role:master, and returns
// it. Without a deadline in ctx it waits at most 30 seconds.
func (s *Sentinel) WaitForNewMaster(ctx context.Context, old *Server) (*Server, error) {
	var found *Server
	err := poll(ctx, sentinelTimeout, "a new master other than "+old.Addr,
		func(ctx context.Context) (bool, error) {
			var agreed *Server
			for _, sen := range s.Sentinels {
				if !sen.available() {
					continue
				}
				m, err := s.masterSeenBy(ctx, sen)
				if err != nil {
					return false, err
				}
				if m == old {
					return false, fmt.Errorf("sentinel %s still names %s", sen.Addr, m.Addr)
				}
				if agreed != nil && agreed != m {
					return false, fmt.Errorf("sentinels disagree: %s and %s", agreed.Addr, m.Addr)
				}
				agreed = m
			}
			if agreed == nil {
				return false, fmt.Errorf("no sentinel is running")
			}
			fields, err := infoShort(ctx, agreed.Addr, "replication")
			if err != nil {
				return false, err
			}
			if fields["role"] != "master" {
				return false, fmt.Errorf("%s has role %s", agreed.Addr, fields["role"])
			}
			found = agreed
			return true, nil
		})
	return found, err
}

// Close closes the sentinels first, so that they do not react, then the
// data servers.
func (s *Sentinel) Close() error {
	servers := append(append([]*Server(nil), s.Sentinels...), s.Replicas...)
	return closeAll(append(servers, s.Master))
}
