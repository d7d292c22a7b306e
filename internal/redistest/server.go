package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startAttempts is how many ports Start tries when the chosen port turns
	// out to be taken by another process.
	startAttempts = 5
	// restartAttempts is how often Restart retries binding its fixed port.
	restartAttempts = 10
)

// errClosed is returned by methods of a closed Server.
var errClosed = errors.New("redistest: server is closed")

// Options configures a server started with Start. The zero value gives a
// standalone master without persistence.
type Options struct {
	// Args are extra redis.conf directives, each written as "name value",
	// for example "maxmemory-policy allkeys-lru". They come after the
	// defaults, so they can override them.
	Args []string
	// Persistence enables the append-only file with fsync on every write,
	// so data survives Kill and Restart. By default nothing is saved.
	Persistence bool
	// ReplicaOf is the "host:port" address of a master to replicate.
	ReplicaOf string
	// Cluster enables cluster mode with the node configuration file in the
	// server directory and a short node timeout (1s) for fast failovers.
	Cluster bool
}

// Server is one server or sentinel process on a loopback port. Kill,
// Pause and Restart act on the process while the port, directory and data
// files stay the same; Close ends it for good.
type Server struct {
	// Addr is "127.0.0.1:<Port>".
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// Dir is the server's private directory (configuration, log, data).
	Dir string

	opts         Options
	kind         kind
	programs     programs // the binaries it was started with, for Restart too
	sentinelConf string   // configuration body of a sentinel, without port and dir

	mu     sync.Mutex
	proc   *process // nil while the server is down
	paused bool
	closed bool
}

// Start starts a server of the chosen kind (see ServerEnv) with opts and
// waits until it answers PING.
func Start(opts Options) (*Server, error) {
	if opts.Cluster && opts.ReplicaOf != "" {
		return nil, errors.New("redistest: Options.Cluster and Options.ReplicaOf cannot be combined")
	}
	if opts.ReplicaOf != "" {
		if _, _, err := net.SplitHostPort(opts.ReplicaOf); err != nil {
			return nil, fmt.Errorf("redistest: bad ReplicaOf address: %w", err)
		}
	}
	opts.Args = append([]string(nil), opts.Args...)
	return startServer(&Server{opts: opts, kind: kindRedis})
}

// startServer creates the directory, picks a port and launches s, moving to
// another port if the chosen one is taken meanwhile.
func startServer(s *Server) (*Server, error) {
	p, err := require(false)
	if err != nil {
		return nil, err
	}
	s.programs = p
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s.Dir = dir
	bus := s.opts.Cluster
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port, err := reservePort(bus)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.launch(true)
		if err == nil {
			return s, nil
		}
		releasePort(port, bus)
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Close kills the process if it runs, waits for it and removes the
// directory. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stop()
	releasePort(s.Port, s.opts.Cluster)
	return os.RemoveAll(s.Dir)
}

// Kill sends SIGKILL to the server and waits until it has exited. The server
// stays down until Restart. Killing a server that is down does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.stop()
	return nil
}

// Pause stops the process with SIGSTOP: connections stay open but nothing
// is answered until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.runningLocked(); err != nil {
		return err
	}
	if err := signalGroup(s.proc.cmd.Process.Pid, sigStop); err != nil {
		return err
	}
	s.paused = true
	return nil
}

// Resume continues a process stopped by Pause.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.runningLocked(); err != nil {
		return err
	}
	if err := signalGroup(s.proc.cmd.Process.Pid, sigCont); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// runningLocked returns an error unless the process is running. The caller
// holds s.mu.
func (s *Server) runningLocked() error {
	if s.closed {
		return errClosed
	}
	if s.proc == nil {
		return fmt.Errorf("redistest: server %s is down", s.Addr)
	}
	return nil
}

// Restart starts the server again on the same port and directory with the
// same options, killing it first if it is running, and waits until it
// answers PING. Without Persistence the data is gone afterwards; cluster
// nodes keep their identity (nodes.conf) and sentinels their state.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.stop()
	delay := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.launch(false)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == restartAttempts {
			return err
		}
		// Another process holds the port for a moment; try again shortly.
		time.Sleep(delay)
		delay *= 2
		if delay > 500*time.Millisecond {
			delay = 500 * time.Millisecond
		}
	}
}

// Running reports whether the process is up (possibly paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.exited()
}

// Paused reports whether the process is stopped by Pause.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.paused
}

// available reports whether the server is running and not paused, that is
// whether a command sent to it can be answered.
func (s *Server) available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.paused && !s.exited()
}

// exited reports whether the current process has ended on its own. The
// caller holds s.mu and s.proc is not nil.
func (s *Server) exited() bool {
	select {
	case <-s.proc.exited:
		return true
	default:
		return false
	}
}

// Client returns a new go-redis client with default options for this
// server. The caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// Do runs one command on a new connection, closed afterwards, and returns
// the RESP2 reply the way go-redis's Do does: a string for status and bulk
// replies, int64, []any for arrays, redis.Nil as the error for a nil reply
// and an error satisfying redis.Error for an error reply. Arguments are
// formatted like go-redis formats them. There are no retries; without a
// deadline in ctx the command is limited to 5 seconds.
func (s *Server) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: Do needs a command")
	}
	strs := make([]string, len(args))
	for i, a := range args {
		strs[i] = formatArg(a)
	}
	v, err := command(ctx, s.Addr, strs...)
	if err == nil && v == nil {
		return nil, redis.Nil
	}
	return v, err
}

// KillPubSubClients closes every connection in pub/sub mode (CLIENT KILL
// TYPE pubsub, which on Redis 7 includes sharded subscribers) and returns
// how many were closed.
func (s *Server) KillPubSubClients(ctx context.Context) (int, error) {
	n, err := commandInt(ctx, s.Addr, "CLIENT", "KILL", "TYPE", "pubsub")
	return int(n), err
}

// String returns the server address.
func (s *Server) String() string { return s.Addr }
