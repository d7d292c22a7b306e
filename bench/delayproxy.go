package main

// The delaying proxy of -rtt: a TCP proxy in front of the Redis server
// that holds every byte it reads for half the added round trip before it
// passes it on, in each direction, as the link to a server in another
// zone would. Every client of the run (the libraries', the round-trip
// measurement's, the worker processes') connects through it; only the
// bench's admin connection (INFO, FLUSHALL) goes to the server directly.
//
// The delay is a latency, not a rate: each chunk read is stamped with the
// time it may go on and waits for that time alone, so a pipelined batch
// of N commands costs one round trip, not N.
//
// The proxy runs in a process of its own, the bench's binary started
// again with proxyEnv set, so that its CPU time and allocations count
// neither as the clients' nor as the server's, and so that the bench's
// garbage collector does not hold its traffic up. Its CPU time, which it
// reports when asked, is counted on its own (Result.ProxyCPUPerCycleUs).
// It waits on a timerfd (Linux, delaywait_linux.go): Go's timers in an
// idle process fire on whole milliseconds, which made a wait of 0.5ms
// take 1.1ms and one of 1.5ms take 2.2ms.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"
)

// proxyEnv, set in the environment, makes the binary the delaying proxy
// instead of a bench run.
const proxyEnv = "RELOCK_BENCH_PROXY"

// addedRTT is the round trip the proxy adds (-rtt); 0 without a proxy.
var addedRTT time.Duration

// chunkSize is the most a pipe reads at once.
const chunkSize = 16 << 10

// queueLen is how many chunks a pipe holds on their way; its reader waits
// when they are all in flight.
const queueLen = 256

// proxySpec is what the proxy process is to do: the bench's first
// message.
type proxySpec struct {
	Target string `json:"target"`
	OneWay int64  `json:"one_way_ns"`
}

// proxyReady is the proxy process's first message: where it listens, or
// why it could not.
type proxyReady struct {
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"`
}

// proxyCPU is the proxy process's answer to every line the bench sends it
// after the spec: the CPU time it has used so far.
type proxyCPU struct {
	CPU int64 `json:"cpu_ns"`
}

// proxyProc is the proxy process seen from the bench. It is not safe for
// concurrent use.
type proxyProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *json.Decoder
	addr  string // where clients connect
}

// startProxy starts the proxy process in front of target, adding rtt to
// every round trip, half in each direction.
func startProxy(target string, rtt time.Duration) (*proxyProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	in, out, err := startChild(cmd, proxyEnv)
	if err != nil {
		return nil, err
	}
	p := &proxyProc{cmd: cmd, stdin: in, out: json.NewDecoder(out)}
	var ready proxyReady
	err = json.NewEncoder(in).Encode(proxySpec{Target: target, OneWay: int64(rtt / 2)})
	if err == nil {
		err = p.out.Decode(&ready)
	}
	if err == nil && ready.Error != "" {
		err = errors.New(ready.Error)
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("delaying proxy: %w", err)
	}
	p.addr = ready.Addr
	return p, nil
}

// cpu returns the CPU time (user and system) the proxy process has used;
// 0 where the bench does not read CPU times (processCPU).
func (p *proxyProc) cpu() (time.Duration, error) {
	if _, err := io.WriteString(p.stdin, "\n"); err != nil {
		return 0, fmt.Errorf("delaying proxy: %w", err)
	}
	var c proxyCPU
	if err := p.out.Decode(&c); err != nil {
		return 0, fmt.Errorf("delaying proxy: %w", err)
	}
	return time.Duration(c.CPU), nil
}

// stop ends the proxy process: it exits when its stdin closes, and is
// killed if it has not within a second.
func (p *proxyProc) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// runProxyProc is main for the proxy process: it reads its proxySpec on
// stdin, answers with its address on stdout, and forwards connections
// until stdin closes, answering every line it reads there with its CPU
// time.
func runProxyProc() int {
	in, out := bufio.NewReader(os.Stdin), json.NewEncoder(os.Stdout)
	var spec proxySpec
	line, err := in.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &spec)
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		_ = out.Encode(proxyReady{Error: err.Error()})
		return 1
	}
	if err := out.Encode(proxyReady{Addr: ln.Addr().String()}); err != nil {
		return 1
	}
	go func() { _ = delayProxy{target: spec.Target, oneWay: time.Duration(spec.OneWay)}.serve(ln) }()
	// The bench closes stdin to stop the proxy, or dies: either way, EOF.
	for {
		if _, err := in.ReadBytes('\n'); err != nil {
			return 0
		}
		if err := out.Encode(proxyCPU{CPU: int64(processCPU())}); err != nil {
			return 1
		}
	}
}

// delayProxy forwards connections to target, every byte delayed by
// oneWay in each direction.
type delayProxy struct {
	target string
	oneWay time.Duration
}

// serve forwards every connection accepted on ln until ln is closed.
func (p delayProxy) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go p.link(c)
	}
}

// link connects client to the target and forwards both ways until either
// side closes, then closes both.
func (p delayProxy) link(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
		})
	}
	go p.pipe(client, server, closeBoth)
	go p.pipe(server, client, closeBoth)
}

// chunk is what one read returned, and when it may be passed on.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe passes on to `to` what arrives on from, each chunk oneWay after it
// was read and in the order read. Its buffers go round between its reader
// and its writer, so forwarding allocates nothing once they exist.
func (p delayProxy) pipe(from, to net.Conn, closeBoth func()) {
	queue := make(chan chunk, queueLen)
	free := make(chan []byte, queueLen+2) // every buffer there is fits
	go func() {
		defer close(queue)
		for {
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, chunkSize)
			}
			n, err := from.Read(buf)
			if n > 0 {
				queue <- chunk{data: buf[:n], due: time.Now().Add(p.oneWay)}
			}
			if err != nil {
				return
			}
		}
	}()
	w := newDelayWaiter()
	defer w.close()
	defer func() {
		closeBoth()
		// The reader stops on the closed connection; let it.
		for range queue {
		}
	}()
	for c := range queue {
		w.until(c.due)
		if _, err := to.Write(c.data); err != nil {
			return
		}
		select {
		case free <- c.data[:cap(c.data)]:
		default:
		}
	}
}
