package mcpclient_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// BenchmarkReadRoundTrip measures sequential round trips of a read tool
// through mcpclient and through mcp-go's own client, each against its own
// process of the same fixture binary, interleaved call by call so that both
// see the same machine load. Both send the same _meta (key and progress
// token). ratio = mcpclient rt/s ÷ mcp-go rt/s.
//
//	go test -run '^$' -bench ReadRoundTrip -benchtime 5000x ./mcpclient/
func BenchmarkReadRoundTrip(b *testing.B) {
	ctx := context.Background()
	opts := testOptions()
	ours := mcpclient.New(fixture(), opts)
	defer ours.Close()
	if err := ours.Start(ctx); err != nil {
		b.Fatal(err)
	}

	direct := client.NewClient(transport.NewStdio(fixtureBin, nil))
	defer direct.Close()
	if err := direct.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "0"}
	if _, err := direct.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}

	args := map[string]any{"text": "hello"}
	viaOurs := func(i int) {
		out := ours.Call(ctx, "echo", args, mcpclient.CallOptions{Key: fmt.Sprintf("bench-key-%012d", i), IdleTimeout: 30 * time.Second})
		if out.Kind != mcpclient.DeliveryResult {
			b.Fatalf("mcpclient: %+v", out)
		}
	}
	viaDirect := func(i int) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "echo"
		req.Params.Arguments = args
		req.Params.Meta = &mcp.Meta{
			ProgressToken:    fmt.Sprintf("bench-token-%d", i),
			AdditionalFields: map[string]any{mcpclient.KeyMetaField: fmt.Sprintf("bench-key-%012d", i)},
		}
		if _, err := direct.CallTool(ctx, req); err != nil {
			b.Fatalf("mcp-go: %v", err)
		}
	}
	for i := 0; i < 200; i++ { // warm both processes and both clients
		viaOurs(i)
		viaDirect(i)
	}

	oursLat := make([]time.Duration, 0, b.N)
	directLat := make([]time.Duration, 0, b.N)
	timed := func(f func(int), i int, into *[]time.Duration) {
		t0 := time.Now()
		f(i)
		*into = append(*into, time.Since(t0))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			timed(viaOurs, i, &oursLat)
			timed(viaDirect, i, &directLat)
		} else {
			timed(viaDirect, i, &directLat)
			timed(viaOurs, i, &oursLat)
		}
	}
	b.StopTimer()

	oursRate, directRate := rate(oursLat), rate(directLat)
	b.ReportMetric(oursRate, "mcpclient-rt/s")
	b.ReportMetric(directRate, "mcpgo-rt/s")
	b.ReportMetric(oursRate/directRate, "ratio")
	b.ReportMetric(pct(oursLat, 50), "mcpclient-p50-µs")
	b.ReportMetric(pct(oursLat, 99), "mcpclient-p99-µs")
	b.ReportMetric(pct(directLat, 50), "mcpgo-p50-µs")
	b.ReportMetric(pct(directLat, 99), "mcpgo-p99-µs")
}

func rate(lat []time.Duration) float64 {
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return float64(len(lat)) / sum.Seconds()
}

func pct(lat []time.Duration, p int) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[i].Microseconds())
}
