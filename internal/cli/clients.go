package cli

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// clientInfo is what a relock Client says of itself in Redis: the hash
// layout.ClientKey(uuid), kept alive while the Client runs.
type clientInfo struct {
	Host    string `json:"host"`
	PID     string `json:"pid"`
	Program string `json:"program"`
	Version string `json:"version,omitempty"`
	Started string `json:"started,omitempty"`
	Name    string `json:"name,omitempty"`
}

// String is how a holder reads for an operator: "host pid 123 program",
// with the Client's name in parentheses when it has one.
func (ci *clientInfo) String() string {
	if ci == nil {
		return "unknown client"
	}
	s := ci.Host + " pid " + ci.PID + " " + ci.Program
	if ci.Name != "" {
		s += " (" + ci.Name + ")"
	}
	return s
}

// uuidOf returns the "<uuid>" of an owner id "<uuid>:<n>".
func uuidOf(owner string) string {
	id, _, _ := strings.Cut(owner, ":")
	return id
}

// identify fills in the client of every holder of locks, reading the
// identity hashes of their uuids in one pipeline. A holder whose Client
// left no hash (Redisson, another library, a relock Client from before
// identities, or one that died) keeps a nil client.
func identify(ctx context.Context, rdb redis.UniversalClient, locks []*lockInfo) error {
	cmds := make(map[string]*redis.MapStringStringCmd)
	pipe := rdb.Pipeline()
	for _, li := range locks {
		for _, h := range li.holders {
			if !isOwner(h.owner) {
				continue // a permit of Redisson's, or a queue member of another form
			}
			id := uuidOf(h.owner)
			if cmds[id] == nil {
				cmds[id] = pipe.HGetAll(ctx, layout.ClientKey(id))
			}
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	clients := make(map[string]*clientInfo, len(cmds))
	for id, cmd := range cmds {
		f := cmd.Val()
		if f["host"] == "" && f["pid"] == "" {
			continue
		}
		clients[id] = &clientInfo{Host: f["host"], PID: f["pid"], Program: f["program"],
			Version: f["version"], Started: f["started"], Name: f["name"]}
	}
	for _, li := range locks {
		for i := range li.holders {
			li.holders[i].client = clients[uuidOf(li.holders[i].owner)]
		}
	}
	return nil
}

// clientsOf returns the Client of each of owners (see identify), in
// order; nil for an owner whose Client is unknown or that is no owner id.
func clientsOf(ctx context.Context, rdb redis.UniversalClient, owners []string) ([]*clientInfo, error) {
	li := &lockInfo{holders: make([]holder, len(owners))}
	for i, o := range owners {
		li.holders[i].owner = o
	}
	if err := identify(ctx, rdb, []*lockInfo{li}); err != nil {
		return nil, err
	}
	clients := make([]*clientInfo, len(owners))
	for i, h := range li.holders {
		clients[i] = h.client
	}
	return clients, nil
}
