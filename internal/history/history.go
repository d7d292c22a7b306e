// Package history records the holds of locks and semaphores and checks
// them: no two holds of a lock may overlap unless both are shared (readers
// of a read-write lock), fencing tokens must grow with every exclusive
// acquisition of a lock, and no more holds of a semaphore may be in
// progress at once than it has permits (counted holds).
package history

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Violation kinds reported by Check.
const (
	// KindOverlap: two holds of one name were open at the same time.
	KindOverlap = "overlap"
	// KindTokenBackwards: an exclusive hold's fencing token was not
	// greater than the token of every hold of the same name that began
	// before it, or a shared hold's was below the token of the exclusive
	// hold that began last before it. Shared holds are not ordered among
	// themselves.
	KindTokenBackwards = "token-backwards"
	// KindOutlived: a hold went on after its loss was signalled (Signal),
	// and another hold of the same name began in between that it may not
	// overlap (for a counted hold: one that found the name's permits all
	// in use, this hold's included). The lock did its part; the holder did
	// not stop in time.
	KindOutlived = "outlived-loss"
	// KindOverCapacity: a counted hold began while as many holds of its
	// name as the name has permits were in progress, none of them told of
	// its loss: an over-grant.
	KindOverCapacity = "over-capacity"
)

// Recorder records holds. The zero value is not usable: call New. A
// Recorder is safe for concurrent use.
//
// Overlaps are detected two ways: exactly, when a hold begins while
// another hold of the same name is still open, and by comparing the
// intervals of all holds of a name on the monotonic clock. Both kinds of
// evidence are reported once per pair of holds.
type Recorder struct {
	start time.Time // carries the monotonic clock reading all times are relative to

	mu         sync.Mutex
	names      map[string]*nameState
	holds      []*Hold // in Begin order
	violations []Violation
	reported   map[[2]int]bool // overlapping pairs already reported, by Seq
	overGrants map[int]bool    // counted holds already reported over capacity, by Seq
}

// nameState is what the Recorder knows about one lock name.
type nameState struct {
	open  map[*Hold]struct{} // holds begun and not yet ended
	holds []*Hold            // in Begin order
	last  *Hold              // the last exclusive hold of the name with a token
	top   *Hold              // the hold of the name with the greatest token so far; a shared hold always has one
	// capacity is the number of permits of a counted name (BeginCounted),
	// 0 for a lock's.
	capacity int
}

// HoldInfo describes one hold.
type HoldInfo struct {
	Who   string        // the client or worker that held the lock
	Name  string        // the lock's name
	Token uint64        // the hold's fencing token; 0 when it has none
	Seq   int           // position in the Recorder's Begin order, from 1
	Begin time.Duration // when the hold began, since the Recorder was made
	End   time.Duration // when it ended; -1 while it is open
	Lost  bool          // the hold ended by a loss signal, not by unlocking
	// Shared: the hold was begun with BeginShared, and may overlap other
	// shared holds of its name.
	Shared bool
	// Capacity is, for a counted hold (BeginCounted), the number of
	// permits of its name; 0 for a hold of a lock.
	Capacity int

	Signalled bool          // the hold's loss was signalled (Signal, or Lost)
	SignalAt  time.Duration // when the loss was first signalled, if Signalled
}

// Open reports whether the hold has not ended.
func (h HoldInfo) Open() bool { return h.End < 0 }

func (h HoldInfo) String() string {
	end := "open"
	if !h.Open() {
		end = h.End.String()
		if h.Lost {
			end += " (lost)"
		}
	}
	switch {
	case h.Capacity > 0:
		return fmt.Sprintf("#%d %s one of %d permits [%v, %s]", h.Seq, h.Who, h.Capacity, h.Begin, end)
	case h.Shared:
		return fmt.Sprintf("#%d %s shared token %d [%v, %s]", h.Seq, h.Who, h.Token, h.Begin, end)
	}
	return fmt.Sprintf("#%d %s token %d [%v, %s]", h.Seq, h.Who, h.Token, h.Begin, end)
}

// Hold is one recorded hold. Its methods are safe for concurrent use.
type Hold struct {
	r    *Recorder
	info HoldInfo // guarded by r.mu
}

// Violation is one breach of mutual exclusion, or of a semaphore's
// capacity, found by Check.
type Violation struct {
	Kind string   // KindOverlap, KindTokenBackwards, KindOutlived or KindOverCapacity
	Name string   // the lock's or semaphore's name
	A, B HoldInfo // the two holds involved, A the one that began first
	// With is, for KindOverCapacity, the holds in progress when B began
	// (its capacity of them, or more) in Begin order, A the first.
	With   []HoldInfo
	Detail string // a human-readable account
}

func (v Violation) String() string {
	return fmt.Sprintf("%s on %q: %s", v.Kind, v.Name, v.Detail)
}

// New returns an empty Recorder whose clock starts now.
func New() *Recorder {
	return &Recorder{
		start:      time.Now(),
		names:      make(map[string]*nameState),
		reported:   make(map[[2]int]bool),
		overGrants: make(map[int]bool),
	}
}

// now returns the monotonic time since the Recorder was made.
func (r *Recorder) now() time.Duration { return time.Since(r.start) }

// Begin records that who starts holding the lock name exclusively, with
// the fencing token token (0 for none). Call it after the lock was
// acquired and before the protected work; a hold that begins while
// another hold of name is open is recorded as an overlap at once. It
// panics on a name of counted holds (BeginCounted).
func (r *Recorder) Begin(who, name string, token uint64) *Hold {
	return r.begin(who, name, token, false, 0)
}

// BeginShared records that who starts holding the lock name shared, as a
// reader of a read-write lock: it may overlap other shared holds of name,
// never an exclusive one. token is the latest fencing token as the hold
// found it, which a reader does not advance: it may equal the token of
// the exclusive hold of name that began last before it, never fall below
// it, and the next exclusive hold's must be above it. Readers are not
// ordered among themselves. It is always checked, 0 included (no
// exclusive hold had taken a token yet). It panics on a name of counted
// holds (BeginCounted).
func (r *Recorder) BeginShared(who, name string, token uint64) *Hold {
	return r.begin(who, name, token, true, 0)
}

// begin records a hold: exclusive, shared, or counted when capacity > 0.
func (r *Recorder) begin(who, name string, token uint64, shared bool, capacity int) *Hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.beginAt(who, name, token, shared, capacity, r.now())
}

// Add records an exclusive hold that was observed elsewhere, such as in
// another process: who held the lock name with token from begin to end
// on a clock of the caller's (the same for every hold added), and lost
// tells whether it ended by a loss signal. Add the holds of a name in the
// order of their tokens; do not mix added holds and begun ones in one
// Recorder. Check compares the added holds' intervals as it does begun
// ones'.
func (r *Recorder) Add(who, name string, token uint64, begin, end time.Duration, lost bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.beginAt(who, name, token, false, 0, begin)
	h.info.End, h.info.Lost = end, lost
	if lost {
		h.info.Signalled, h.info.SignalAt = true, end
	}
	delete(r.names[name].open, h)
}

// beginAt records a hold begun at the time at. r.mu is held.
func (r *Recorder) beginAt(who, name string, token uint64, shared bool, capacity int, at time.Duration) *Hold {
	h := &Hold{r: r, info: HoldInfo{
		Who:      who,
		Name:     name,
		Token:    token,
		Seq:      len(r.holds) + 1,
		Begin:    at,
		End:      -1,
		Shared:   shared,
		Capacity: capacity,
	}}
	st := r.names[name]
	if st == nil {
		st = &nameState{open: make(map[*Hold]struct{}), capacity: capacity}
		r.names[name] = st
	}
	if st.capacity != capacity {
		panic(fmt.Sprintf("history: a hold of %q with %d permits, which has %d (0: a lock)", name, capacity, st.capacity))
	}
	if capacity > 0 {
		others := make([]HoldInfo, 0, len(st.open))
		for o := range st.open {
			others = append(others, o.info)
		}
		r.crowd(h.info, others, "began while the others were still held")
	}
	for o := range st.open {
		if capacity == 0 && conflict(o.info, h.info) {
			r.overlap(o.info, h.info, "began while the other was still held")
		}
	}
	if capacity == 0 && (token != 0 || shared) {
		prev := st.top // an exclusive hold must be above every earlier one
		if shared {
			prev = st.last // a shared one at least at the last exclusive one
		}
		if prev != nil && backwards(token, prev.info.Token, shared) {
			p := prev.info
			r.violations = append(r.violations, Violation{
				Kind: KindTokenBackwards,
				Name: name,
				A:    p,
				B:    h.info,
				Detail: fmt.Sprintf("hold #%d (%s) got token %d after hold #%d (%s) got token %d",
					h.info.Seq, who, token, p.Seq, p.Who, p.Token),
			})
		}
		if !shared {
			st.last = h
		}
		if st.top == nil || token > st.top.info.Token {
			st.top = h
		}
	}
	st.open[h] = struct{}{}
	st.holds = append(st.holds, h)
	r.holds = append(r.holds, h)
	return h
}

// backwards reports whether token, of a shared hold or not, went back
// from last, the token of the hold before it: below it, or, for an
// exclusive hold, equal to it.
func backwards(token, last uint64, shared bool) bool {
	return token < last || !shared && token == last
}

// conflict reports whether holds a and b may not overlap: unless both are
// shared.
func conflict(a, b HoldInfo) bool { return !a.Shared || !b.Shared }

// overlap records an overlap of holds a and b, once per pair. r.mu is held.
func (r *Recorder) overlap(a, b HoldInfo, how string) {
	if a.Seq > b.Seq {
		a, b = b, a
	}
	pair := [2]int{a.Seq, b.Seq}
	if r.reported[pair] {
		return
	}
	r.reported[pair] = true
	if a.Signalled && a.SignalAt <= b.Begin {
		r.violations = append(r.violations, outlived(a, b))
		return
	}
	r.violations = append(r.violations, Violation{
		Kind: KindOverlap,
		Name: a.Name,
		A:    a,
		B:    b,
		Detail: fmt.Sprintf("hold #%d (%s, token %d) %s: hold #%d (%s, token %d)",
			b.Seq, b.Who, b.Token, how, a.Seq, a.Who, a.Token),
	})
}

// End records that the hold ended by unlocking. Call it before the unlock
// is sent, so that the next holder's Begin cannot precede it. Only the
// first End or Lost of a hold counts.
func (h *Hold) End() { h.end(false) }

// Lost records that the hold ended by a loss signal, at the time of the
// call. Only the first End or Lost of a hold counts.
func (h *Hold) Lost() { h.end(true) }

func (h *Hold) end(lost bool) {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !h.info.Open() {
		return
	}
	h.info.End = r.now()
	h.info.Lost = lost
	if lost && !h.info.Signalled {
		h.info.Signalled, h.info.SignalAt = true, h.info.End
	}
	delete(r.names[h.info.Name].open, h)
}

// Info returns a snapshot of the hold.
func (h *Hold) Info() HoldInfo {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.info
}

// Holds returns the number of holds begun so far.
func (r *Recorder) Holds() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holds)
}

// Check returns every violation found so far, in the order found: holds of
// one name that overlapped (but for shared holds with each other), counted
// holds that began over their name's capacity, and fencing tokens that did
// not grow in Begin order: strictly for exclusive holds, not below for
// shared ones. Exclusive holds without a token (0), and counted holds, are
// not checked for tokens. Holds still open count as lasting until now.
func (r *Recorder) Check() []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.names {
		r.sweep(st)
	}
	return append([]Violation(nil), r.violations...)
}

// sweep compares the intervals of a name's holds. r.mu is held.
func (r *Recorder) sweep(st *nameState) {
	hs := byBegin(st.holds)
	var active []*Hold // holds whose interval may still contain the next Begin
	for _, h := range hs {
		active = inProgress(active, h.info.Begin)
		if st.capacity > 0 {
			others := make([]HoldInfo, len(active))
			for i, a := range active {
				others[i] = a.info
			}
			r.crowd(h.info, others, "began before enough of the others ended")
		} else {
			for _, a := range active {
				if conflict(a.info, h.info) {
					r.overlap(a.info, h.info, "began before the other ended")
				}
			}
		}
		active = append(active, h)
	}
}

// byBegin returns a copy of hs sorted by Begin, ties in Begin order.
func byBegin(hs []*Hold) []*Hold {
	hs = append([]*Hold(nil), hs...)
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].info.Begin < hs[j].info.Begin })
	return hs
}

// inProgress keeps, of active, the holds still in progress at t, in place:
// open, or ended after t.
func inProgress(active []*Hold, t time.Duration) []*Hold {
	kept := active[:0]
	for _, a := range active {
		if a.info.Open() || a.info.End > t {
			kept = append(kept, a)
		}
	}
	return kept
}
