package redistest

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
)

const (
	// readyTimeout bounds how long a started process may take to answer PING.
	readyTimeout = 10 * time.Second
	// logTailLines is how many log lines a startup error quotes.
	logTailLines = 30
)

// errAddrInUse marks a startup that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// kind tells which program a Server runs.
type kind int

const (
	kindRedis kind = iota
	kindSentinel
)

// process is one run of the server program.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait has returned
	err    error         // the result of Wait, valid after exited is closed
}

// confPath is the configuration file of the server.
func (s *Server) confPath() string {
	if s.kind == kindSentinel {
		return filepath.Join(s.Dir, "sentinel.conf")
	}
	return filepath.Join(s.Dir, "redis.conf")
}

// LogFile returns the path of the server's log file.
func (s *Server) LogFile() string {
	if s.kind == kindSentinel {
		return filepath.Join(s.Dir, "sentinel.log")
	}
	return filepath.Join(s.Dir, "redis.log")
}

// outputFile collects the process's stdout and stderr, where errors that
// happen before the log file is opened (bad configuration) end up.
func (s *Server) outputFile() string { return filepath.Join(s.Dir, "output.log") }

// quote renders a configuration argument as a double-quoted string.
func quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// config returns the configuration file contents for the current port.
func (s *Server) config() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("port %d", s.Port)
	line("bind 127.0.0.1")
	line("protected-mode no")
	line("daemonize no")
	line("dir %s", quote(s.Dir))
	line("logfile %s", quote(s.LogFile()))
	if s.kind == kindSentinel {
		b.WriteString(s.sentinelConf)
		return b.String()
	}
	if s.opts.Persistence {
		line("appendonly yes")
		line("appendfsync always")
	} else {
		line(`save ""`)
		line("appendonly no")
	}
	line("repl-diskless-sync-delay 0")
	// A replica only shows up in CLUSTER SLOTS once its replication offset
	// is not zero, and an idle master only advances the offset with these
	// pings, so send them every second instead of every ten.
	line("repl-ping-replica-period 1")
	if s.opts.Cluster {
		line("cluster-enabled yes")
		line("cluster-config-file nodes.conf")
		line("cluster-node-timeout 1000")
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		line("replicaof %s %s", host, port)
	}
	for _, a := range s.opts.Args {
		line("%s", a)
	}
	return b.String()
}

// launch writes the configuration, starts the process and waits until it
// answers PING. A sentinel keeps the configuration it rewrote itself when
// it is restarted (fresh is false). The caller holds s.mu.
func (s *Server) launch(fresh bool) error {
	if fresh || s.kind != kindSentinel {
		if err := os.WriteFile(s.confPath(), []byte(s.config()), 0o644); err != nil {
			return err
		}
	}
	logStart := fileSize(s.LogFile())
	outStart := fileSize(s.outputFile())
	out, err := os.OpenFile(s.outputFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if s.kind == kindSentinel {
		name, args := s.programs.sentinelCommand(s.confPath())
		cmd = exec.Command(name, args...)
	} else {
		cmd = exec.Command(s.programs.server, s.confPath())
	}
	cmd.Dir = s.Dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = out.Close()
	if err != nil {
		return fmt.Errorf("redistest: starting %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.proc = p
	s.paused = false

	if err := s.waitReady(p); err != nil {
		s.stop()
		tail := readTail(s.outputFile(), outStart) + readTail(s.LogFile(), logStart)
		if strings.Contains(tail, "Address already in use") {
			err = errAddrInUse
		}
		return fmt.Errorf("redistest: %s on %s did not start: %w\n--- log tail (%s) ---\n%s",
			filepath.Base(cmd.Path), s.Addr, err, s.Dir, tail)
	}
	return nil
}

// waitReady polls PING until it answers, the process exits or readyTimeout
// passes.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	delay := 2 * time.Millisecond
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		v, err := command(ctx, s.Addr, "PING")
		cancel()
		if err == nil && v == "PONG" {
			// Make sure the answer came from this process and not from
			// another one that holds the port.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			var fields map[string]string
			fields, err = info(ctx, s.Addr, "server")
			cancel()
			if err == nil {
				if fields["process_id"] == strconv.Itoa(p.cmd.Process.Pid) {
					return nil
				}
				return fmt.Errorf("%w: port answered by process %s", errAddrInUse, fields["process_id"])
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v (last error: %v)", readyTimeout, last)
		}
		t := time.NewTimer(delay)
		select {
		case <-p.exited:
			t.Stop()
			return fmt.Errorf("process exited: %v", p.err)
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// stop kills the running process, if any, and waits for it. The caller
// holds s.mu.
func (s *Server) stop() {
	p := s.proc
	if p == nil {
		return
	}
	_ = signalGroup(p.cmd.Process.Pid, sigKill)
	// Make sure the leader itself is gone even if it left its group.
	_ = p.cmd.Process.Kill()
	<-p.exited
	s.proc = nil
	s.paused = false
}

// fileSize returns the size of a file, or 0 if it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readTail returns the last logTailLines lines written to path after
// offset from.
func readTail(path string, from int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) <= from {
		return ""
	}
	lines := strings.SplitAfter(string(data[from:]), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "")
}
