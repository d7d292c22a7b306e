package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// installHint is printed when redis-server is not on PATH.
const installHint = "sudo apt-get install -y redis-server"

// server is the Redis server the benchmark runs against: a redis-server
// process of our own, or one given with -redis.
type server struct {
	addr      string        // where clients connect: the server, or the proxy in front of it
	redisAddr string        // the server's own address
	admin     *redis.Client // one connection, straight to the server, for INFO and FLUSHALL only
	owned     bool          // started by us: safe to flush, killed by stop
	cmd       *exec.Cmd
	dir       string
	proxy     *proxyProc // the delaying proxy (-rtt), or nil
}

// startServer starts redis-server on a free loopback port without
// persistence, in a temporary directory, and waits until it answers.
func startServer() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH; install it with: %s", installHint)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "relock-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "redis.log")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &server{addr: addr, redisAddr: addr, owned: true, cmd: cmd, dir: dir}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := s.connect(exited); err != nil {
		s.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, fmt.Errorf("redis-server did not start: %w\n%s", err, log)
	}
	return s, nil
}

// dialServer uses a server someone else runs.
func dialServer(addr string) (*server, error) {
	s := &server{addr: addr, redisAddr: addr}
	if err := s.connect(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// connect opens the admin connection and waits up to 5s for PING, or until
// exited is closed.
func (s *server) connect(exited <-chan struct{}) error {
	s.admin = redis.NewClient(&redis.Options{
		Addr:                     s.redisAddr,
		Protocol:                 2,
		PoolSize:                 1,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.admin.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the process exited")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delay starts the delaying proxy (delayproxy.go) in front of the server,
// adding rtt to every round trip; from then on clients connect through it.
func (s *server) delay(rtt time.Duration) error {
	p, err := startProxy(s.redisAddr, rtt)
	if err != nil {
		return err
	}
	s.proxy, s.addr = p, p.addr
	return nil
}

// stop stops the proxy, closes the admin connection and, for a server of
// our own, kills the process and removes its directory.
func (s *server) stop() {
	if s.proxy != nil {
		s.proxy.stop()
	}
	if s.admin != nil {
		_ = s.admin.Close()
	}
	if !s.owned {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = os.RemoveAll(s.dir)
}

// reset empties a server of our own, so every measurement starts from the
// same keyspace. A server given with -redis is never flushed.
func (s *server) reset(ctx context.Context) error {
	if !s.owned {
		return nil
	}
	return s.admin.FlushAll(ctx).Err()
}

// usage is a snapshot of what the server has done: the commands it ran
// and the CPU time it used; and the CPU time of the delaying proxy in
// front of it (-rtt), if there is one.
type usage struct {
	cmds     int64
	cpu      time.Duration
	proxyCPU time.Duration
}

// sub returns what the server did between b and u.
func (u usage) sub(b usage) usage {
	return usage{cmds: u.cmds - b.cmds, cpu: u.cpu - b.cpu, proxyCPU: u.proxyCPU - b.proxyCPU}
}

// usage returns the sum of calls over all INFO commandstats lines, and the
// server's CPU time, user and system (INFO cpu). The server counts every
// command a Lua script runs, and counts this INFO in the next snapshot,
// not in this one.
func (s *server) usage(ctx context.Context) (usage, error) {
	info, err := s.admin.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return usage{}, err
	}
	var u usage
	if s.proxy != nil {
		if u.proxyCPU, err = s.proxy.cpu(); err != nil {
			return usage{}, err
		}
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, value, _ := strings.Cut(line, ":")
		switch {
		case name == "used_cpu_sys" || name == "used_cpu_user":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return usage{}, fmt.Errorf("bad cpu line %q", line)
			}
			u.cpu += time.Duration(f * float64(time.Second))
		case strings.HasPrefix(name, "cmdstat_"):
			for _, f := range strings.Split(value, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return usage{}, fmt.Errorf("bad commandstats line %q", line)
					}
					u.cmds += n
				}
			}
		}
	}
	return u, nil
}

// version returns the server's redis_version.
func (s *server) version(ctx context.Context) (string, error) {
	info, err := s.admin.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no redis_version in INFO server")
}

// versionAtLeast reports whether a dotted version is at least want.
func versionAtLeast(version string, want ...int) bool {
	parts := strings.Split(version, ".")
	for i, w := range want {
		n := 0
		if i < len(parts) {
			n, _ = strconv.Atoi(parts[i])
		}
		if n != w {
			return n > w
		}
	}
	return true
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
