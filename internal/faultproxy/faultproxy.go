// Package faultproxy is a TCP proxy for tests: it forwards connections
// from a loopback port to a server and, on command, delays the bytes in
// either direction, stalls all traffic as a network partition would, or
// drops every connection.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Direction names one way of a proxied connection.
type Direction int

const (
	// Up is the way from the client to the server.
	Up Direction = iota
	// Down is the way from the server to the client.
	Down
)

// chunkSize is the most a pipe reads at once.
const chunkSize = 32 << 10

// queueLen is how many chunks a pipe holds before its reader waits.
const queueLen = 256

// Proxy listens on a loopback port and forwards every connection to its
// target. A Proxy is safe for concurrent use.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	delay   [2]time.Duration
	stalled chan struct{} // closed while traffic flows; open while stalled
	links   map[*link]struct{}
	closed  bool

	wg sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 with a free port, forwarding to target
// ("host:port"). Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{ln: ln, target: target, stalled: flowing, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes connections accepted from now on go to target; those
// already open stay with the old one (Drop closes them).
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// SetDelay makes every byte read from now on in direction dir wait d
// before it is passed on. Bytes keep their order.
func (p *Proxy) SetDelay(dir Direction, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay[dir] = d
}

// Stall holds all traffic, in both directions and on every connection,
// without closing anything, until Resume: the peers see a silent network.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
		p.stalled = make(chan struct{})
	default: // already stalled
	}
}

// Resume lets traffic held by Stall flow again, in order.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
	default:
		close(p.stalled)
	}
}

// Drop closes every open connection on both sides, discarding what is in
// flight, and returns how many there were. New connections are accepted
// as usual.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Conns returns the number of open connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, drops every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Drop()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		s, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s, done: make(chan struct{})}
		l.queue[Up] = make(chan chunk, queueLen)
		l.queue[Down] = make(chan chunk, queueLen)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(5)
		go p.read(l, Up, c)
		go p.write(l, Up, s)
		go p.read(l, Down, s)
		go p.write(l, Down, c)
		go func() {
			defer p.wg.Done()
			<-l.done
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}()
	}
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	client, server net.Conn
	queue          [2]chan chunk // by Direction
	once           sync.Once
	done           chan struct{}
}

type chunk struct {
	data []byte
	due  time.Time
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// read moves what arrives on from into the direction's queue, stamped
// with the time it may be passed on.
func (p *Proxy) read(l *link, dir Direction, from net.Conn) {
	defer p.wg.Done()
	defer l.close()
	q := l.queue[dir]
	for {
		buf := make([]byte, chunkSize)
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay[dir]
			p.mu.Unlock()
			select {
			case q <- chunk{data: buf[:n], due: time.Now().Add(d)}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write passes the direction's queue on to to, each chunk once it is due
// and traffic is not stalled.
func (p *Proxy) write(l *link, dir Direction, to net.Conn) {
	defer p.wg.Done()
	defer l.close()
	q := l.queue[dir]
	for {
		var c chunk
		select {
		case c = <-q:
		case <-l.done:
			return
		}
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		p.mu.Lock()
		flowing := p.stalled
		p.mu.Unlock()
		select {
		case <-flowing:
		case <-l.done:
			return
		}
		if _, err := to.Write(c.data); err != nil {
			return
		}
	}
}
