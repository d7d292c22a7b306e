package relock_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()), relock.WithTracerProvider(tp))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	name := testkit.LockName(t)

	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rl, err := c.RWMutex(name + ":rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}

	spans := rec.Ended()
	want := []struct {
		name, kind string
		acquired   bool // lock spans only
		failed     bool
	}{
		{"relock.Lock", "mutex", true, false},
		{"relock.TryLock", "mutex", false, false},
		{"relock.Unlock", "mutex", false, false},
		{"relock.RLock", "rw", true, false},
		{"relock.Unlock", "rw", false, false},
		{"relock.Unlock", "mutex", false, true},
	}
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(spans), len(want))
	}
	for i, w := range want {
		s := spans[i]
		a := attrs(s)
		if s.Name() != w.name || a["relock.kind"].AsString() != w.kind || a["relock.name"].AsString() == "" {
			t.Errorf("span %d: %s %v, want %s of kind %s", i, s.Name(), a, w.name, w.kind)
		}
		if v, ok := a["relock.acquired"]; ok && v.AsBool() != w.acquired {
			t.Errorf("span %d (%s): relock.acquired %v, want %v", i, s.Name(), v.AsBool(), w.acquired)
		}
		if w.acquired && a["relock.token"].AsInt64() != int64(l.Token()) && w.kind == "mutex" {
			t.Errorf("span %d: token %v, want %d", i, a["relock.token"], l.Token())
		}
		if failed := s.Status().Code == codes.Error; failed != w.failed {
			t.Errorf("span %d (%s): error status %v, want %v", i, s.Name(), failed, w.failed)
		}
	}
}

func TestTracingNilProvider(t *testing.T) {
	_, err := relock.New(testkit.CloseLater(t, testkit.Standalone.Client()), relock.WithTracerProvider(nil))
	if !errors.Is(err, relock.ErrInvalidOption) {
		t.Fatalf("New with a nil tracer provider: %v, want ErrInvalidOption", err)
	}
}
