package main

// The cross-process workload: the bench starts itself once per worker,
// each worker process with a client of its own, and merges what they
// measured. The parent sends each process a procSpec, waits until every
// one is connected, then sends the same window (procWindow) to all; each
// warms up until the window starts, measures until it ends, and answers
// with a procResult. Times cross the process boundary as wall-clock
// nanoseconds, which processes on one machine share.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// workerEnv, set in the environment, makes the binary a worker process
// instead of a bench run.
const workerEnv = "RELOCK_BENCH_WORKER"

// procSpec is what a worker process is to do: the parent's first message.
type procSpec struct {
	Addr     string `json:"addr"`
	Lib      string `json:"lib"`
	Workload string `json:"workload"`
	Key      string `json:"key"`
	Worker   int    `json:"worker"`
	Pool     int    `json:"pool"`
}

// procWindow is the measured window, in Unix ns: the parent's second
// message, and the start signal.
type procWindow struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// procResult is a worker process's message: first Ready (or Error), then
// its figures.
type procResult struct {
	Ready   bool    `json:"ready,omitempty"`
	Error   string  `json:"error,omitempty"`
	Cycles  int64   `json:"cycles"`
	Think   int64   `json:"think_ns"`
	Lat     []int64 `json:"lat_ns"`  // per cycle, lock call to unlock return
	Elapsed int64   `json:"elapsed"` // ns from the window's start to the last cycle's end
	Calls   int64   `json:"calls"`
	Mallocs uint64  `json:"mallocs"`
	CPU     int64   `json:"cpu_ns"`
	Holds   Holds   `json:"holds"`
}

// workerProc is one worker process seen from the parent.
type workerProc struct {
	cmd *exec.Cmd
	in  *json.Encoder
	out *json.Decoder
}

// measureProcs runs a turn's workers as worker processes.
func measureProcs(ctx context.Context, s *server, t turn) Result {
	exe, err := os.Executable()
	if err != nil {
		return t.failed("start workers", err)
	}
	procs := make([]*workerProc, 0, t.w.workers)
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	for i := range t.w.workers {
		p, err := startWorkerProc(ctx, exe, procSpec{Addr: s.addr, Lib: t.lib, Workload: t.w.name,
			Key: t.w.key(t.base, i), Worker: i, Pool: poolSize})
		if err != nil {
			return t.failed("start workers", err)
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if _, err := p.receive(); err != nil {
			return t.failed("connect", err)
		}
	}
	start := time.Now().Add(t.warmup)
	win := procWindow{Start: start.UnixNano(), End: start.Add(t.d).UnixNano()}
	for _, p := range procs {
		if err := p.in.Encode(win); err != nil {
			return t.failed("start", err)
		}
	}
	time.Sleep(time.Until(start))
	used0, err := s.usage(ctx)
	if err != nil {
		return t.failed("INFO", err)
	}
	var (
		w      window
		parts  []Holds
		runErr error
	)
	for _, p := range procs {
		r, err := p.receive()
		if err != nil {
			runErr = errors.Join(runErr, err)
			continue
		}
		w.st.cycles += r.Cycles
		w.st.think += time.Duration(r.Think)
		for _, ns := range r.Lat {
			w.st.lat = append(w.st.lat, time.Duration(ns))
		}
		w.elapsed = max(w.elapsed, time.Duration(r.Elapsed))
		w.calls += r.Calls
		w.mallocs += r.Mallocs
		w.cpu += time.Duration(r.CPU)
		parts = append(parts, r.Holds)
	}
	used1, err := s.usage(ctx)
	if err != nil {
		return t.failed("INFO", err)
	}
	w.used = used1.sub(used0)
	w.tl = mergeHolds(parts)
	w.st.overlaps = w.tl.overlaps()
	return t.figures(w, runErr)
}

// startChild starts cmd, this binary, as a child of the bench with env
// set to "1" (what the child is to be), its stderr the bench's, and
// returns its stdin and stdout.
func startChild(cmd *exec.Cmd, env string) (io.WriteCloser, io.ReadCloser, error) {
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// startWorkerProc starts this binary as a worker process and sends it spec.
func startWorkerProc(ctx context.Context, exe string, spec procSpec) (*workerProc, error) {
	cmd := exec.CommandContext(ctx, exe)
	in, out, err := startChild(cmd, workerEnv)
	if err != nil {
		return nil, err
	}
	p := &workerProc{cmd: cmd, in: json.NewEncoder(in), out: json.NewDecoder(out)}
	if err := p.in.Encode(spec); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return p, nil
}

// receive reads the process's next message; an Error in it is returned.
func (p *workerProc) receive() (procResult, error) {
	var r procResult
	if err := p.out.Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("worker process exited")
		}
		return r, err
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

// runWorkerProc is main for a worker process: it reads its procSpec and
// procWindow on stdin and writes its procResults on stdout.
func runWorkerProc() int {
	in, out := json.NewDecoder(os.Stdin), json.NewEncoder(os.Stdout)
	r, err := workInProc(in, out)
	if err != nil {
		r = procResult{Error: err.Error()}
	}
	if err := out.Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "bench worker:", err)
		return 1
	}
	return 0
}

// workInProc connects, reports ready, and runs the window it is sent.
func workInProc(in *json.Decoder, out *json.Encoder) (procResult, error) {
	var spec procSpec
	if err := in.Decode(&spec); err != nil {
		return procResult{}, err
	}
	poolSize = spec.Pool
	w, okW := workloadNamed(spec.Workload)
	open, okL := libraryNamed(spec.Lib)
	if !okW || !okL {
		return procResult{}, fmt.Errorf("unknown library %q or workload %q", spec.Lib, spec.Workload)
	}
	s, err := dialServer(spec.Addr)
	if err != nil {
		return procResult{}, err
	}
	defer s.stop()
	ctx := context.Background()
	lib, err := open(ctx, s, w)
	if err != nil {
		return procResult{}, err
	}
	defer lib.close()
	lk := lib.locker(spec.Key)
	if err := out.Encode(procResult{Ready: true}); err != nil {
		return procResult{}, err
	}
	var win procWindow
	if err := in.Decode(&win); err != nil {
		return procResult{}, err
	}
	start, end := time.Unix(0, win.Start), time.Unix(0, win.End)
	ctx, cancel := context.WithDeadline(ctx, end.Add(lockGrace))
	defer cancel()
	if _, err := worker(ctx, w, spec.Worker, lk, start, nil, nil); err != nil {
		return procResult{}, fmt.Errorf("warm-up: %w", err)
	}
	tl := newTimeline(start, int(end.Sub(start).Seconds()*5000)+256)
	m := startMeter(lib)
	st, err := worker(ctx, w, spec.Worker, lk, end, tl, nil)
	elapsed := time.Since(start)
	calls, mallocs, cpu := m.stop()
	if err != nil {
		return procResult{}, err
	}
	r := procResult{Cycles: st.cycles, Think: int64(st.think), Elapsed: int64(elapsed),
		Calls: calls, Mallocs: mallocs, CPU: int64(cpu), Holds: tl.Holds}
	r.Lat = make([]int64, len(st.lat))
	for i, d := range st.lat {
		r.Lat[i] = int64(d)
	}
	return r, nil
}
