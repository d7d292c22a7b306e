package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the proxy process, which
// startProxy starts from os.Executable.
func TestMain(m *testing.M) {
	if os.Getenv(proxyEnv) != "" {
		os.Exit(runProxyProc())
	}
	os.Exit(m.Run())
}

// echoServer returns the address of a server that sends back what it
// reads, on every connection.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// delayed starts a delayProxy in this process in front of target and
// returns a connection through it.
func delayed(t *testing.T, target string, oneWay time.Duration) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = delayProxy{target: target, oneWay: oneWay}.serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg on c and reads as many bytes back.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("the echo differs from what was sent")
	}
	return time.Since(start)
}

const testOneWay = 5 * time.Millisecond

func TestDelayProxyRoundTrip(t *testing.T) {
	c := delayed(t, echoServer(t), testOneWay)
	for range 5 {
		d := roundTrip(t, c, []byte("PING\r\n"))
		if d < 2*testOneWay {
			t.Fatalf("round trip %v, shorter than the %v added", d, 2*testOneWay)
		}
		t.Logf("round trip %v for %v added", d, 2*testOneWay)
	}
}

// TestDelayProxyPipelined checks that the delay is a latency, not a rate:
// 100 commands written one after another, without waiting for replies,
// all come back after about one round trip, not 100.
func TestDelayProxyPipelined(t *testing.T) {
	c := delayed(t, echoServer(t), testOneWay)
	roundTrip(t, c, []byte("warm\r\n"))
	const n = 100
	msg := []byte("SET key value\r\n")
	start := time.Now()
	go func() {
		for range n {
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}()
	back := make([]byte, n*len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	if !bytes.Equal(back, bytes.Repeat(msg, n)) {
		t.Fatal("the echoes differ from what was sent")
	}
	rtt := 2 * testOneWay
	if d < rtt || d > 3*rtt {
		t.Fatalf("%d pipelined commands took %v; want about one round trip of %v", n, d, rtt)
	}
	t.Logf("%d pipelined commands: %v for a round trip of %v", n, d, rtt)
}

// TestDelayProxyBulk checks that a payload larger than the pipe's
// buffers comes through whole and in order.
func TestDelayProxyBulk(t *testing.T) {
	c := delayed(t, echoServer(t), time.Millisecond)
	msg := make([]byte, 3<<20)
	_, _ = rand.Read(msg)
	go func() { _, _ = c.Write(msg) }()
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("the echo differs from what was sent")
	}
}

// TestProxyProcess starts the proxy as a process of its own, as -rtt
// does, and measures a round trip through it.
func TestProxyProcess(t *testing.T) {
	p, err := startProxy(echoServer(t), 2*testOneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := roundTrip(t, c, []byte("PING\r\n")); d < 2*testOneWay {
		t.Fatalf("round trip %v, shorter than the %v added", d, 2*testOneWay)
	}
}
