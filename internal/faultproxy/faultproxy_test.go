package faultproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return conn{c, bufio.NewReader(c)}
}

// roundTrip sends a line and returns the echo, or an error.
func (c conn) roundTrip(line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

func TestForwards(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	for _, msg := range []string{"a", "bb", "ccc"} {
		if got, err := c.roundTrip(msg); err != nil || got != msg {
			t.Fatalf("roundTrip(%q) = %q, %v", msg, got, err)
		}
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns() = %d, want 1", n)
	}
}

func TestDelay(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	const up, down = 30 * time.Millisecond, 20 * time.Millisecond
	p.SetDelay(Up, up)
	p.SetDelay(Down, down)
	begin := time.Now()
	if got, err := c.roundTrip("x"); err != nil || got != "x" {
		t.Fatalf("roundTrip = %q, %v", got, err)
	}
	if took := time.Since(begin); took < up+down {
		t.Fatalf("round trip took %v, less than the delays %v", took, up+down)
	}
}

func TestStallAndResume(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("warm"); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	p.Stall() // idempotent
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("a reply came through a stalled proxy")
	}
	p.Resume()
	p.Resume() // idempotent
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if s, err := c.r.ReadString('\n'); err != nil || s != "held\n" {
		t.Fatalf("after Resume: %q, %v", s, err)
	}
}

func TestDrop(t *testing.T) {
	p := start(t)
	a, b := dial(t, p), dial(t, p)
	for _, c := range []conn{a, b} {
		if _, err := c.roundTrip("x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Drop(); n != 2 {
		t.Fatalf("Drop() = %d, want 2", n)
	}
	if _, err := a.roundTrip("y"); err == nil {
		t.Fatal("a dropped connection still works")
	}
	c := dial(t, p) // new connections work
	if got, err := c.roundTrip("z"); err != nil || got != "z" {
		t.Fatalf("after Drop: %q, %v", got, err)
	}
}

func TestSetTarget(t *testing.T) {
	p := start(t)
	before := dial(t, p)
	if _, err := before.roundTrip("x"); err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	p.SetTarget(other.Addr().String())
	if _, err := before.roundTrip("still the echo"); err != nil {
		t.Fatalf("an open connection moved: %v", err)
	}
	after := dial(t, p)
	c, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "from the new target\n"); err != nil {
		t.Fatal(err)
	}
	_ = after.SetReadDeadline(time.Now().Add(10 * time.Second))
	if s, err := after.r.ReadString('\n'); err != nil || s != "from the new target\n" {
		t.Fatalf("new connection read %q, %v", s, err)
	}
}

func TestClose(t *testing.T) {
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := c.roundTrip("x"); err != nil {
		t.Fatal(err)
	}
	p.Stall() // goroutines waiting on a stall end too
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("a closed proxy accepts connections")
	}
}
