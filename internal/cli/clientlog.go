package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
)

// commandLogger is the logger of the relock Client of a command that holds
// something while its command runs (run, elect): the Client's warnings
// and errors go to w as that command's own lines, "relock run: renewal
// failed (locks=1, err=...)", one per record. The loss of a hold is left
// out: the command reports it itself, with what it did about it.
func commandLogger(w io.Writer, prefix string) *slog.Logger {
	return slog.New(&lineHandler{w: w, prefix: prefix})
}

// ownReports are the messages of the Client's records that relock run and
// elect report themselves, each in its own line.
var ownReports = []string{"relock: lock lost", "relock: permit lost"}

// lineHandler writes records of level Warn and above as one line each,
// the prefix first, then the message and the attributes in parentheses.
// Groups are flattened: the library logs none.
type lineHandler struct {
	w      io.Writer
	prefix string
	attrs  []slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	if slices.Contains(ownReports, r.Message) {
		return nil
	}
	var b strings.Builder
	b.WriteString(h.prefix + ": " + unprefixed(r.Message))
	sep := " ("
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s%s=%v", sep, a.Key, a.Value)
		sep = ", "
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if sep == ", " {
		b.WriteString(")")
	}
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lineHandler{w: h.w, prefix: h.prefix, attrs: append(slices.Clip(h.attrs), attrs...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
