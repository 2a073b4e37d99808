package jsonscan

import (
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkValid measures Valid on recorded deliveries, beside encoding/json's
// Valid, which the presets ran before.
func BenchmarkValid(b *testing.B) {
	for _, name := range []string{"telegram_message", "feishu_message_push1", "onebot_group_message"} {
		body, err := os.ReadFile("../../platform/testdata/" + name + ".json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/jsonscan", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !Valid(body, jsonDepth) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(name+"/encoding-json-baseline", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !json.Valid(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
