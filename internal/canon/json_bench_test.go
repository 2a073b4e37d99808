package canon

import (
	"os"
	"testing"
)

// BenchmarkAppendJSONText measures the canonical form of JSON texts, beside
// the former parser (json_legacy_test.go) in the same run.
func BenchmarkAppendJSONText(b *testing.B) {
	card := `{"app": "com.tencent.miniapp", "meta": {"id": 1234, "title": "hello world"}, "ver": "1.0"}`
	feishu, err := os.ReadFile("../../platform/testdata/feishu_message_push1.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, text string }{{"card", card}, {"feishu", string(feishu)}} {
		buf := make([]byte, 0, 4096)
		for _, p := range []struct {
			name  string
			parse func([]byte, string) ([]byte, bool)
		}{{"jsonscan", AppendJSONText}, {"legacy-baseline", legacyAppendJSONText}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(tc.text)))
				for b.Loop() {
					if _, ok := p.parse(buf[:0], tc.text); !ok {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}
