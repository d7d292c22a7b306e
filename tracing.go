package relock

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WithTracerProvider traces the lock calls of the Client with the tracer
// "github.com/relock-go/relock": every Lock, TryLock, RLock and TryRLock
// of a Mutex, FairMutex or RWMutex is a span named after the call
// ("relock.Lock", "relock.TryRLock", ...), waiting included, and every
// Unlock of their Leases a span "relock.Unlock". Spans carry relock.name
// and relock.kind ("mutex", "fair", "rw"); a lock span also carries
// relock.acquired and, when acquired, relock.token. A TryLock that finds
// the lock held is not an error; other failures are recorded on the span.
// Without this option no span is started and nothing is added to the lock
// path. A nil tp is refused with ErrInvalidOption.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
		}
		c.tracer = tp.Tracer(meterName)
		return nil
	}
}

// traced runs lock, a lock call named op of the lock name of the kind
// given: in a span when tracing is on. Every lock call of Mutex,
// FairMutex and RWMutex goes through it.
func (c *Client) traced(ctx context.Context, op, kind, name string, lock func(context.Context) (*Lease, error)) (*Lease, error) {
	if c.cfg.tracer == nil {
		return lock(ctx)
	}
	ctx, span := c.cfg.tracer.Start(ctx, "relock."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("relock.name", name), attribute.String("relock.kind", kind)))
	defer span.End()
	l, err := lock(ctx)
	span.SetAttributes(attribute.Bool("relock.acquired", err == nil))
	switch {
	case err == nil:
		span.SetAttributes(attribute.Int64("relock.token", int64(l.Token())))
	case !errors.Is(err, ErrNotAcquired):
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return l, err
}

// traceUnlock runs the unlock of l in a span.
func (c *Client) traceUnlock(ctx context.Context, l *Lease, kind string, unlock func(context.Context) error) error {
	ctx, span := c.cfg.tracer.Start(ctx, "relock.Unlock", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("relock.name", l.name), attribute.String("relock.kind", kind),
			attribute.Int64("relock.token", int64(l.token))))
	defer span.End()
	err := unlock(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// The kinds of the releasers, for traces.
func (*Mutex) kind() string       { return "mutex" }
func (*FairMutex) kind() string   { return "fair" }
func (*ReadLocker) kind() string  { return "rw" }
func (*WriteLocker) kind() string { return "rw" }
