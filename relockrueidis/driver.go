package relockrueidis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/slots"
)

// driver is a rueidis client as a driver of relock's door. It never
// closes the client.
type driver struct {
	c       rueidis.Client
	cluster bool
	settle  time.Duration // see settle

	mu    sync.Mutex
	slots map[int]string // a cluster's slot map as last read: slot to master's address
	nodes map[string]*node
}

var _ door.Driver = (*driver)(nil)

func newDriver(c rueidis.Client) *driver {
	return &driver{c: c, cluster: c.Mode() == rueidis.ClientModeCluster, settle: settle, nodes: make(map[string]*node)}
}

// build returns cmd as rueidis's command: the arguments before the key,
// the key (by which a cluster client routes it), the arguments after.
// rueidis sends none of these again after a lost reply (it only retries
// commands built read-only): Do and Pipe decide (see retries).
func build(b rueidis.Builder, cmd door.Cmd) rueidis.Completed {
	args := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		args[i] = text(a)
	}
	if cmd.Key <= 0 || cmd.Key >= len(args) {
		return b.Arbitrary(args...).Build()
	}
	return b.Arbitrary(args[:cmd.Key]...).Keys(args[cmd.Key]).Args(args[cmd.Key+1:]...).Build()
}

// text returns an argument as Redis reads it, the way go-redis writes
// the same values.
func text(a any) string {
	switch v := a.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Duration:
		return strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprint(a)
}

// reply returns rueidis's result, of a call made with ctx, as the door's
// reply.
func reply(ctx context.Context, r rueidis.RedisResult) door.Reply {
	if err := r.NonRedisError(); err != nil {
		return door.Failed(cut(ctx, err))
	}
	m, err := r.ToMessage()
	if err != nil {
		return door.Failed(asDoor(err))
	}
	v, err := value(&m)
	if err != nil {
		return door.Failed(err)
	}
	return door.Value(v)
}

// cut returns a transport error err of a call made with ctx; once ctx
// has ended, an error that also matches ctx's: rueidis reports a dial cut
// short by ctx's deadline as an I/O timeout, at times before ctx itself
// reports its end, and callers ask errors.Is whether their context ended.
// The end of the context a call handed rueidis (see detach) reads as the
// end of ctx.
func cut(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	switch {
	case cerr == nil || errors.Is(err, cerr):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return cerr
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// settle is how long a call whose context ends still waits for the
// replies of the commands it handed rueidis. Once a call's context ends,
// rueidis answers it with the context's error at once, while its commands
// may still wait in a connection's queue and be written after (and a
// standalone or Sentinel client pipelines on several connections to the
// server): relock, told of an outcome unknown, sends the undo, which may
// then run before the command it undoes, on another connection, and the
// command runs after it (a fair lock's queue entry left behind). Waiting
// for the replies, as go-redis does, orders the undo after them; only a
// server that does not answer within settle leaves the outcome open, and
// then the undo may come first, as after any lost reply.
const settle = time.Second

// detach returns the context to hand rueidis for a call made with ctx,
// which has not ended: one that ends d.settle after ctx does (and the
// function that releases it), so that a command rueidis took is waited
// for (see settle).
func (d *driver) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if dl, ok := ctx.Deadline(); ok {
		// rueidis sends a lone call with a deadline on its own, not
		// queued, bounding its reads by the deadline and not by the
		// context's end: there, a command is waited for until settle
		// after the deadline.
		var cancelInner context.CancelFunc
		inner, cancelInner = context.WithDeadline(inner, dl.Add(d.settle))
		parent := cancel
		cancel = func() { cancelInner(); parent() }
	}
	bound := d.settle
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-inner.Done():
		}
	})
	return inner, func() { stop(); cancel() }
}

// asDoor returns a server's error reply as a door.Error (door.Nil for a
// nil reply), and any other error as it is.
func asDoor(err error) error {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return err
	}
	if re.IsNil() {
		return door.Nil
	}
	return door.Error(re.Error())
}

// value returns a reply that is no error as the door's value: an int64, a
// string, a bool, a float64, a []any or a map[any]any; in an array or a
// map, a nil element is nil and an error element its door.Error.
func value(m *rueidis.RedisMessage) (any, error) {
	switch {
	case m.IsNil():
		return nil, nil
	case m.Error() != nil:
		return asDoor(m.Error()), nil
	case m.IsInt64():
		return m.AsInt64()
	case m.IsBool():
		return m.AsBool()
	case m.IsFloat64():
		return m.AsFloat64()
	case m.IsArray():
		a, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(a))
		for i := range a {
			if out[i], err = value(&a[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	case m.IsMap():
		mm, err := m.ToMap()
		if err != nil {
			return nil, err
		}
		out := make(map[any]any, len(mm))
		for k, x := range mm {
			if out[k], err = value(&x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return m.ToString()
}

// retries is how many times Do, Pipe and the slot map's read send a
// command that is not Once again after a transport error, as go-redis does
// by default: a call on a connection found broken (the server restarted)
// fails, and the next goes on a new one; so does a call that shared a
// connection being made with a call whose context ended first, which cut
// the dial short for both. rueidis itself sends again only read-only
// commands, and then until the context ends.
const retries = 3

// again reports whether a command that got err, and is Once or not, may
// be sent again.
func again(ctx context.Context, once bool, err error) bool {
	return !once && err != nil && door.ClassOf(err) == door.Transport &&
		ctx.Err() == nil && !errors.Is(err, rueidis.ErrClosing)
}

// retried returns the result of try, which sends one command, tried again
// as retries says.
func retried(ctx context.Context, once bool, try func() rueidis.RedisResult) rueidis.RedisResult {
	for n := 0; ; n++ {
		r := try()
		if n == retries || !again(ctx, once, r.NonRedisError()) {
			return r
		}
	}
}

// Do sends cmd and returns its reply, waited for a while after ctx ends
// (see settle). rueidis pipelines concurrent calls on a connection by
// itself.
func (d *driver) Do(ctx context.Context, cmd door.Cmd) door.Reply {
	return reply(ctx, retried(ctx, cmd.Once, func() rueidis.RedisResult {
		if err := ctx.Err(); err != nil {
			return rueidis.NewErrorResult(err) // not sent
		}
		inner, release := d.detach(ctx)
		defer release()
		return d.c.Do(inner, build(d.c.B(), cmd))
	}))
}

// Pipe sends xs together; on a cluster rueidis splits them by slot. The
// commands that failed on a broken connection and may be sent again go
// again, together.
func (d *driver) Pipe(ctx context.Context, xs []door.Exchange) {
	d.pipe(ctx, d.c, xs)
	for n := 0; n < retries; n++ {
		var redo []door.Exchange
		var at []int
		for i, x := range xs {
			if again(ctx, x.Cmd.Once, x.Reply.Err()) {
				redo = append(redo, door.Exchange{Cmd: x.Cmd})
				at = append(at, i)
			}
		}
		if len(redo) == 0 {
			return
		}
		d.pipe(ctx, d.c, redo)
		for j, i := range at {
			xs[i].Reply = redo[j].Reply
		}
	}
}

// pipe sends xs in one DoMulti of c, waited for as Do is.
func (d *driver) pipe(ctx context.Context, c rueidis.CoreClient, xs []door.Exchange) {
	if len(xs) == 0 {
		return
	}
	if err := ctx.Err(); err != nil {
		for i := range xs {
			xs[i].Reply = door.Failed(err) // not sent
		}
		return
	}
	cmds := make(rueidis.Commands, len(xs))
	for i, x := range xs {
		cmds[i] = build(c.B(), x.Cmd)
	}
	inner, release := d.detach(ctx)
	defer release()
	for i, r := range c.DoMulti(inner, cmds...) {
		xs[i].Reply = reply(ctx, r)
	}
}

// Cluster reports whether the client is a cluster client.
func (d *driver) Cluster() bool { return d.cluster }

// Master returns the master of key's slot on a cluster, by the slot map
// the driver reads itself (rueidis does not expose its own), or the one
// server of a standalone or Sentinel client, whose dedicated connections
// go to the master of the moment.
func (d *driver) Master(ctx context.Context, key string) (door.Node, error) {
	if !d.cluster {
		return d.node(""), nil
	}
	slot := slots.Of(key)
	d.mu.Lock()
	addr, ok := d.slots[slot]
	d.mu.Unlock()
	if !ok {
		if err := d.reload(ctx); err != nil {
			return nil, err
		}
		d.mu.Lock()
		addr, ok = d.slots[slot]
		d.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("relock: no master serves slot %d", slot)
		}
	}
	return d.node(addr), nil
}

// Masters returns every master of a cluster, from its slot map read
// again, or the one server.
func (d *driver) Masters(ctx context.Context) ([]door.Node, error) {
	if !d.cluster {
		return []door.Node{d.node("")}, nil
	}
	if err := d.reload(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	seen := make(map[string]bool)
	var addrs []string
	for _, addr := range d.slots {
		if !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	d.mu.Unlock()
	nodes := make([]door.Node, len(addrs))
	for i, addr := range addrs {
		nodes[i] = d.node(addr)
	}
	return nodes, nil
}

// Reload reads a cluster's slot map again. rueidis refreshes its own
// when a server answers MOVED.
func (d *driver) Reload(ctx context.Context) {
	if d.cluster {
		_ = d.reload(ctx)
	}
}

// ReadTimeout is 0: rueidis bounds a call by its context alone.
func (d *driver) ReadTimeout() time.Duration { return 0 }

// reload reads the cluster's slot map with CLUSTER SLOTS. The read is
// waited for as Do's commands are (see settle), so that it completes for
// the calls after this one though this one's context ends first: the
// calls of a fresh Client with contexts shorter than the read would each
// start it and give it up (rueidis closes a connection whose lone call
// passed its deadline), and none would find a master.
func (d *driver) reload(ctx context.Context) error {
	ranges, err := retried(ctx, false, func() rueidis.RedisResult {
		if err := ctx.Err(); err != nil {
			return rueidis.NewErrorResult(err)
		}
		inner, release := d.detach(ctx)
		defer release()
		return d.c.Do(inner, d.c.B().Arbitrary("CLUSTER", "SLOTS").Build())
	}).ToArray()
	if err != nil {
		if !door.IsServer(asDoor(err)) {
			err = cut(ctx, err)
		}
		return fmt.Errorf("relock: reading the cluster's slot map: %w", asDoor(err))
	}
	m := make(map[int]string, 1<<14)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return fmt.Errorf("relock: unexpected CLUSTER SLOTS reply: %v", r.String())
		}
		from, err1 := f[0].AsInt64()
		to, err2 := f[1].AsInt64()
		addr, err3 := d.address(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("relock: unexpected CLUSTER SLOTS reply: %w", err)
		}
		for s := from; s <= to; s++ {
			m[int(s)] = addr
		}
	}
	d.mu.Lock()
	d.slots = m
	d.mu.Unlock()
	return nil
}

// address returns the address of a master as CLUSTER SLOTS gives it
// (host, port, ...), named as rueidis names its nodes. A server that does
// not know its own host gives none: the node of rueidis on that port is
// the one.
func (d *driver) address(m rueidis.RedisMessage) (string, error) {
	f, err := m.ToArray()
	if err != nil || len(f) < 2 {
		return "", fmt.Errorf("relock: unexpected node %v", m.String())
	}
	host, _ := f[0].ToString()
	port, err := f[1].AsInt64()
	if err != nil {
		return "", err
	}
	p := strconv.FormatInt(port, 10)
	if host != "" && host != "?" {
		return net.JoinHostPort(host, p), nil
	}
	for addr := range d.c.Nodes() {
		if strings.HasSuffix(addr, ":"+p) {
			return addr, nil
		}
	}
	return "", fmt.Errorf("relock: no node known on port %s", p)
}

// connect returns rueidis's client of the cluster node at addr. rueidis
// connects to a master it has not seen yet (one that joined the cluster
// after its last refresh) only when a call is redirected there: a read of
// a key in one of the master's slots, answered MOVED, makes it connect.
func (d *driver) connect(ctx context.Context, addr string) (rueidis.Client, error) {
	if c := d.c.Nodes()[addr]; c != nil {
		return c, nil
	}
	slot := -1
	d.mu.Lock()
	for s, a := range d.slots {
		if a == addr {
			slot = s
			break
		}
	}
	d.mu.Unlock()
	if slot >= 0 {
		_ = d.c.Do(ctx, d.c.B().Exists().Key("{"+slots.Tag(slot)+"}").Build()).Error()
		if c := d.c.Nodes()[addr]; c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("relock: no connection to %s", addr)
}

// node returns the node of addr, "" for the one server of a client that
// is not a cluster's. A node is made once per address, so that the
// library sees the same master as the same node.
func (d *driver) node(addr string) *node {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[addr]
	if n == nil {
		n = &node{d: d, addr: addr}
		d.nodes[addr] = n
	}
	return n
}

// node is one server as a door.Node: a cluster's master by its address,
// or the client itself (addr "") where it has one master.
type node struct {
	d    *driver
	addr string
}

// Addr returns the server's address; that of the master of the moment
// for a standalone or Sentinel client. Such a client that also sends to
// replicas names them too: the least address is then a stable name of
// the one node, if not the master's.
func (n *node) Addr() string {
	if n.addr != "" {
		return n.addr
	}
	least := ""
	for addr := range n.d.c.Nodes() {
		if least == "" || addr < least {
			least = addr
		}
	}
	return least
}

// Pipe sends xs in order on one dedicated connection of the server: a
// WAIT among them covers the writes before it.
func (n *node) Pipe(ctx context.Context, xs []door.Exchange) {
	c := n.d.c
	if n.addr != "" {
		var err error
		if c, err = n.d.connect(ctx, n.addr); err != nil {
			for i := range xs {
				xs[i].Reply = door.Failed(err)
			}
			return
		}
	}
	ran := false
	err := c.Dedicated(func(dc rueidis.DedicatedClient) error {
		ran = true
		n.d.pipe(ctx, dc, xs)
		return nil
	})
	if !ran {
		// No connection to send on: every command gets the reason, so
		// that none reads as a nil value.
		if err == nil {
			err = fmt.Errorf("relock: no dedicated connection to %s", n.Addr())
		}
		for i := range xs {
			xs[i].Reply = door.Failed(err)
		}
	}
}
