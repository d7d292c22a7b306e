package cli

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The web view's sampler reads every object once per refresh, whoever
// looks, and keeps what the live page shows and what it has seen over the
// last minutes: each object's holds, waiters, oldest hold and TTL, and the
// events between two samples (a holder that came or went, a lock that
// expired rather than was released, a force-unlock from the page). The
// layouts keep no acquisition time, so a hold's age is the time since the
// view first saw it; one held when the view started is "at least" that old.

// sample is one object's figures at one refresh.
type sample struct {
	At      int64   `json:"t"` // unix ms
	Holds   int64   `json:"holds"`
	Waiting int64   `json:"waiting"`
	AgeS    float64 `json:"age_s"` // the oldest hold's age, in seconds
	TTLms   int64   `json:"ttl_ms"`
}

// event is something that happened to an object between two samples, or
// from the page.
type event struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"` // acquired, released, expired, force-unlocked
	Detail string    `json:"detail"`
}

// maxEvents bounds the events kept per object.
const maxEvents = 100

// objectHistory is what the sampler keeps of one object.
type objectHistory struct {
	kind     string
	samples  []sample
	events   []event
	owners   map[string]string // owner id → who, in the last sample
	lastTTL  time.Duration     // in the last sample
	lastSeen time.Time
	present  bool
	forced   bool // force-unlocked from the page since the last sample
}

func (h *objectHistory) add(e event) {
	h.events = append(h.events, e)
	if len(h.events) > maxEvents {
		h.events = append(h.events[:0], h.events[len(h.events)-maxEvents:]...)
	}
}

// objectID names an object of the view: its name as listed (see label),
// and whether it is an election, which may share its name with a lock.
type objectID struct {
	name     string
	election bool
}

// rowID returns the objectID of a row.
func rowID(r *lockRow) objectID { return objectID{r.Name, r.Kind == kindElection} }

// holdID names one holder of one object, for the time it was first seen.
type holdID struct {
	obj   objectID
	owner string
}

// seenHold is when the view first saw a hold.
type seenHold struct {
	at      time.Time
	atStart bool // in the view's first sample: it may be older
}

// sampler samples the objects of rdb every refresh, keeping keep of
// history.
type sampler struct {
	rdb   redis.UniversalClient
	every time.Duration
	keep  time.Duration

	mu      sync.Mutex
	last    *listing // the latest sample's listing; nil before the first
	objects map[objectID]*objectHistory
	seen    map[holdID]seenHold // first sight of each hold
	samples int
	next    chan struct{} // closed when the next sample is taken
}

func newSampler(rdb redis.UniversalClient, every, keep time.Duration) *sampler {
	return &sampler{rdb: rdb, every: every, keep: keep, objects: make(map[objectID]*objectHistory),
		seen: make(map[holdID]seenHold), next: make(chan struct{})}
}

// run samples until ctx ends.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// sample takes one sample and wakes whoever waits for it.
func (s *sampler) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.every, 5*time.Second))
	defer cancel()
	p := &listing{Match: "*", At: time.Now()}
	locks, err := scanLocks(ctx, s.rdb, "*")
	if err == nil {
		if len(locks) > webLimit {
			locks, p.Truncated = locks[:webLimit], true
		}
		p.Locks, err = rows(ctx, s.rdb, locks)
	}
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
			return // stopping
		}
		p.Err = err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.record(p)
	}
	s.last = p
	close(s.next)
	s.next = make(chan struct{})
}

// record folds the listing p into the history. s.mu is held.
func (s *sampler) record(p *listing) {
	now := p.At
	first := s.samples == 0
	s.samples++
	present := make(map[objectID]bool, len(p.Locks))
	for i := range p.Locks {
		r := &p.Locks[i]
		id := rowID(r)
		present[id] = true
		h := s.objects[id]
		if h == nil {
			h = &objectHistory{owners: map[string]string{}}
			s.objects[id] = h
		}
		h.kind, h.present, h.lastSeen, h.lastTTL = r.Kind, true, now, time.Duration(r.TTLms)*time.Millisecond
		owners := make(map[string]string, len(r.Holders))
		for _, hr := range r.Holders {
			who := hr.Client.String()
			owners[hr.Owner] = who
			k := holdID{id, hr.Owner}
			if _, ok := s.seen[k]; !ok {
				s.seen[k] = seenHold{at: now, atStart: first}
			}
			if _, ok := h.owners[hr.Owner]; !ok && !first {
				h.add(event{At: now, Kind: "acquired", Detail: who + " " + hr.Owner})
			}
		}
		for o, who := range h.owners {
			if _, ok := owners[o]; !ok {
				h.add(event{At: now, Kind: "released", Detail: who + " " + o})
				delete(s.seen, holdID{id, o})
			}
		}
		h.owners = owners
		s.annotate(r, now)
		h.samples = append(h.samples, sample{At: now.UnixMilli(), Holds: r.Holds, Waiting: r.Waiting, AgeS: oldestHold(r), TTLms: r.TTLms})
		s.trim(h, now)
	}
	for id, h := range s.objects {
		if present[id] {
			continue
		}
		if h.present {
			h.present = false
			s.gone(h, id, now)
		}
		h.samples = append(h.samples, sample{At: now.UnixMilli()})
		s.trim(h, now)
		if now.Sub(h.lastSeen) > s.keep {
			delete(s.objects, id)
		}
	}
}

// gone records how an object that was there at the last sample went: a
// force-unlock from the page (recorded then), a release, or an expiry (its
// last TTL ran out within a sample: nobody renewed it).
func (s *sampler) gone(h *objectHistory, id objectID, now time.Time) {
	for o, who := range h.owners {
		delete(s.seen, holdID{id, o})
		switch {
		case h.forced:
		case h.lastTTL >= 0 && h.lastTTL <= s.every+s.every/2:
			h.add(event{At: now, Kind: "expired", Detail: who + " " + o + ": not renewed, lost"})
		default:
			h.add(event{At: now, Kind: "released", Detail: who + " " + o})
		}
	}
	h.owners, h.forced = map[string]string{}, false
}

// trim drops the samples older than the history kept. s.mu is held.
func (s *sampler) trim(h *objectHistory, now time.Time) {
	cut := now.Add(-s.keep).UnixMilli()
	i := 0
	for i < len(h.samples) && h.samples[i].At < cut {
		i++
	}
	if i > 0 {
		h.samples = append(h.samples[:0], h.samples[i:]...)
	}
}

// annotate sets how long each holder of r has been seen holding. s.mu is
// held.
func (s *sampler) annotate(r *lockRow, now time.Time) {
	for i := range r.Holders {
		if r.Holders[i].HeldForMs > 0 {
			continue // known from the lock itself
		}
		if sh, ok := s.seen[holdID{rowID(r), r.Holders[i].Owner}]; ok {
			r.Holders[i].HeldForMs = now.Sub(sh.at).Milliseconds()
			r.Holders[i].AtLeast = sh.atStart
		}
	}
}

// annotateRows sets the hold ages the sampler knows on rows read
// elsewhere (/locks.json, /metrics).
func (s *sampler) annotateRows(rs []lockRow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i := range rs {
		s.annotate(&rs[i], now)
	}
}

// forced records a force-unlock from the page of the object whose key is
// key.
func (s *sampler) forced(key, kind string, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, election := electionName(key)
	id := objectID{name, election}
	h := s.objects[id]
	if h == nil {
		h = &objectHistory{kind: kind, owners: map[string]string{}, lastSeen: time.Now()}
		s.objects[id] = h
	}
	detail := "from the web view; it was not held"
	if held {
		detail = "from the web view"
		h.forced = true
	}
	h.add(event{At: time.Now(), Kind: "force-unlocked", Detail: detail})
}

// current returns the latest listing (nil before the first sample) and a
// channel closed when the next one is taken.
func (s *sampler) current() (*listing, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.next
}

// objectView is what the page of one object shows.
type objectView struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind,omitempty"`
	Row     *lockRow `json:"row,omitempty"` // nil when it is not there now
	Samples []sample `json:"samples"`
	Events  []event  `json:"events"`
	KeepS   int      `json:"keep_s"`
	At      int64    `json:"at"` // unix ms of the sample
	Err     string   `json:"error,omitempty"`
}

// object returns the view of the object id from the latest sample. An
// object named so that is not an election stands for the election of that
// name when there is no other.
func (s *sampler) object(id objectID) objectView {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !id.election && s.objects[id] == nil && s.objects[objectID{id.name, true}] != nil {
		id.election = true
	}
	v := objectView{Name: id.name, Samples: []sample{}, Events: []event{}, KeepS: int(s.keep / time.Second)}
	if s.last != nil {
		v.At, v.Err = s.last.At.UnixMilli(), s.last.Err
		for i := range s.last.Locks {
			if rowID(&s.last.Locks[i]) == id {
				r := s.last.Locks[i]
				v.Row = &r
			}
		}
	}
	if h := s.objects[id]; h != nil {
		v.Kind = h.kind
		v.Samples = append(v.Samples, h.samples...)
		v.Events = append(v.Events, h.events...)
	}
	return v
}

// oldestHold returns the age of r's oldest hold in seconds, 0 when none
// is known.
func oldestHold(r *lockRow) float64 {
	var age float64
	for _, h := range r.Holders {
		age = max(age, float64(h.HeldForMs)/1000)
	}
	return age
}

// oldest returns the oldest hold's age per kind, in seconds.
func oldest(rs []lockRow) map[string]float64 {
	m := make(map[string]float64)
	for i := range rs {
		m[rs[i].Kind] = max(m[rs[i].Kind], oldestHold(&rs[i]))
	}
	return m
}
