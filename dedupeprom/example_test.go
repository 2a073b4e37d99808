package dedupeprom_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func ExampleNewCollector() {
	d := dedupe.New(nil) // a memory store
	reg := prometheus.NewRegistry()
	reg.MustRegister(dedupeprom.NewCollector(d))
	// In a server: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	ctx := context.Background()
	k := dedupe.Key{Channel: "telegram", MessageID: "1001"}
	_ = d.Do(ctx, k, func(context.Context) error { return nil })
	err := d.Do(ctx, k, func(context.Context) error { return nil })
	fmt.Println(err)

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "dedupe_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				fmt.Printf("%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), v)
			}
		}
	}
	fmt.Println(testutil.CollectAndCount(dedupeprom.NewCollector(d), "dedupe_store_duration_seconds"), "store histograms")
	// Output:
	// dedupe: duplicate message
	// dedupe_decisions_total{backend=memory,verdict=duplicate} 1
	// dedupe_decisions_total{backend=memory,verdict=processed} 1
	// 4 store histograms
}
