package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// collect reads every relock instrument's data points from r, by
// instrument name and relock.op attribute (empty when absent).
func collect(t *testing.T, r sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/relock-go/relock" {
			continue
		}
		for _, m := range sm.Metrics {
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			for _, p := range points {
				if _, ok := p.Attributes.Value("relock.client"); !ok {
					t.Errorf("%s: no relock.client attribute", m.Name)
				}
				key := m.Name
				if op, ok := p.Attributes.Value(attribute.Key("relock.op")); ok {
					key += "/" + op.AsString()
				}
				got[key] = p.Value
			}
		}
	}
	return got
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c, err := relock.New(testkit.CloseLater(t, testkit.Standalone.Client()), relock.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	m := c.Mutex(testkit.LockName(t))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	if got["relock.acquisitions"] != 1 || got["relock.holds"] != 1 || got["relock.releases"] != 0 {
		t.Fatalf("while held: %v", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	got = collect(t, reader)
	want := map[string]int64{
		"relock.acquisitions": 1, "relock.releases": 1, "relock.losses": 0, "relock.waits": 0,
		"relock.wakeups": 0, "relock.handoffs": 0, "relock.holds": 0, "relock.waiters.asleep": 0,
		"relock.channels": 0, "relock.replica_sync.short/write": 0, "relock.replica_sync.short/renew": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %d (reported: %v), want %d", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("instruments %v, want those of %v", got, want)
	}

	// A closed Client is observed no more.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, reader); len(got) != 0 {
		t.Fatalf("a closed Client still reports %v", got)
	}
}

func TestMetricsNilProvider(t *testing.T) {
	_, err := relock.New(testkit.CloseLater(t, testkit.Standalone.Client()), relock.WithMeterProvider(nil))
	if !errors.Is(err, relock.ErrInvalidOption) {
		t.Fatalf("New with a nil meter provider: %v, want ErrInvalidOption", err)
	}
}
