package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// delayWaiter waits for a chunk's time on a timerfd, which the runtime's
// poller wakes on as soon as it fires: to within the kernel's wake-up
// latency (about 0.1ms here), where a Go timer in an idle process waits
// for the poller's next whole millisecond. Without a timerfd it sleeps.
type delayWaiter struct {
	fd  int
	f   *os.File // nil if no timerfd could be made
	buf [8]byte
}

func newDelayWaiter() *delayWaiter {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &delayWaiter{}
	}
	return &delayWaiter{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
}

// until returns at t, or at once if t has passed.
func (w *delayWaiter) until(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if w.f != nil {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		if unix.TimerfdSettime(w.fd, 0, &spec, nil) == nil {
			if _, err := w.f.Read(w.buf[:]); err == nil {
				return
			}
		}
	}
	time.Sleep(time.Until(t))
}

func (w *delayWaiter) close() {
	if w.f != nil {
		_ = w.f.Close()
	}
}
