package history

import "fmt"

// Signal records that the hold's loss was signalled at the time of the
// call (its lease's Done closed with a loss, or its Err reported one),
// without ending the hold: the holder may still be working. End or Lost
// then records when it stopped. A hold that another hold of the same
// name overlaps only after the signal is reported by Check as
// KindOutlived instead of KindOverlap. Only the first Signal of an open
// hold counts; Lost signals too.
func (h *Hold) Signal() {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !h.info.Open() || h.info.Signalled {
		return
	}
	h.info.Signalled, h.info.SignalAt = true, r.now()
}

// outlived describes hold a, told of its loss, going on past the Begin of
// hold b. r.mu is held.
func outlived(a, b HoldInfo) Violation {
	end := "is still open"
	if !a.Open() {
		end = "ended at " + a.End.String()
	}
	return Violation{
		Kind: KindOutlived,
		Name: a.Name,
		A:    a,
		B:    b,
		Detail: fmt.Sprintf("hold #%d (%s) was told of its loss at %v but %s, after hold #%d (%s) began at %v",
			a.Seq, whoOf(a), a.SignalAt, end, b.Seq, whoOf(b), b.Begin),
	}
}

// whoOf names the holder of h, with its token unless h is counted.
func whoOf(h HoldInfo) string {
	if h.Capacity > 0 {
		return h.Who
	}
	return fmt.Sprintf("%s, token %d", h.Who, h.Token)
}

// Count returns how many of vs are of the given kind.
func Count(vs []Violation, kind string) int {
	n := 0
	for _, v := range vs {
		if v.Kind == kind {
			n++
		}
	}
	return n
}
