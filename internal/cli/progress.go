package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressSnapshot is what a progress line shows.
type progressSnapshot struct {
	total   int64   // acquisitions so far
	limit   int64   // 0: none
	perLock []int64 // acquisitions per lock
}

// progress prints a live progress line: on a terminal one line rewritten
// in place, elsewhere one line per interval.
type progress struct {
	w     io.Writer
	tty   bool
	read  func() progressSnapshot
	start time.Time
	last  int64
	lastT time.Time

	quit chan struct{}
	done chan struct{}
}

// startProgress prints a line every interval until stop is called.
func startProgress(w io.Writer, tty bool, every time.Duration, read func() progressSnapshot) *progress {
	now := time.Now()
	p := &progress{w: w, tty: tty, read: read, start: now, lastT: now, quit: make(chan struct{}), done: make(chan struct{})}
	go p.loop(every)
	return p
}

func (p *progress) loop(every time.Duration) {
	defer close(p.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.print(false)
		case <-p.quit:
			return
		}
	}
}

// stop ends the loop and prints the final line.
func (p *progress) stop() {
	close(p.quit)
	<-p.done
	p.print(true)
}

func (p *progress) print(final bool) {
	s := p.read()
	now := time.Now()
	var rate float64
	if final {
		rate = float64(s.total) / max(now.Sub(p.start).Seconds(), 1e-9)
	} else {
		rate = float64(s.total-p.last) / max(now.Sub(p.lastT).Seconds(), 1e-9)
	}
	p.last, p.lastT = s.total, now

	var b strings.Builder
	if p.tty {
		b.WriteString("\r")
	}
	fmt.Fprintf(&b, "%6.1fs  %d", now.Sub(p.start).Seconds(), s.total)
	if s.limit > 0 {
		fmt.Fprintf(&b, "/%d", s.limit)
	}
	fmt.Fprintf(&b, " acquisitions  %.0f/s  per lock:", rate)
	for _, n := range s.perLock {
		fmt.Fprintf(&b, " %d", n)
	}
	if p.tty {
		b.WriteString("\x1b[K") // clear the rest of the previous line
		if final {
			b.WriteString("\n")
		}
	} else {
		b.WriteString("\n")
	}
	io.WriteString(p.w, b.String())
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
