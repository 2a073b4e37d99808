package dedupe_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "platforms", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPresetFixtures runs each preset on payloads written from the platforms'
// public documentation.
func TestPresetFixtures(t *testing.T) {
	slackRetry := http.Header{}
	slackRetry.Set("Content-Type", "application/json")
	slackRetry.Set("X-Slack-Retry-Num", "2")
	slackRetry.Set("X-Slack-Retry-Reason", "http_timeout")

	tests := []struct {
		preset  dedupe.Preset
		fixture string
		header  http.Header
		want    dedupe.Key
		wantErr error // checked with errors.Is when set
	}{
		{dedupe.Telegram, "telegram_message.json", nil, dedupe.Key{Channel: "telegram", MessageID: "912345678"}, nil},
		{dedupe.Telegram, "telegram_callback_query.json", nil, dedupe.Key{Channel: "telegram", MessageID: "912345679"}, nil},
		{dedupe.Slack, "slack_event_callback.json", nil, dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}, nil},
		{dedupe.Slack, "slack_event_callback.json", slackRetry, dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}, nil},
		{dedupe.Slack, "slack_url_verification.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
		{dedupe.Slack, "slack_app_rate_limited.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
		{dedupe.Feishu, "feishu_message_push1.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_5ce6d572455d361153b7cb51da133945"}, nil},
		{dedupe.Feishu, "feishu_message_push2.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_5ce6d572455d361153b7cb51da133945"}, nil},
		{dedupe.Feishu, "feishu_reaction.json", nil, dedupe.Key{Channel: "feishu", MessageID: "8fe33a2bc9c5ab7d6a1b1f1c2b52a1e7"}, nil},
		{dedupe.Feishu, "feishu_v1_message.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_36f8c7f4f8b5d1a84b2e7b0e1a3c9d21"}, nil},
		{dedupe.Feishu, "feishu_url_verification.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
		{dedupe.Feishu, "feishu_encrypted.json", nil, dedupe.Key{}, dedupe.ErrNoMessageID},
		{dedupe.Discord, "discord_application_command.json", nil, dedupe.Key{Channel: "discord", MessageID: "1187654321098765432"}, nil},
		{dedupe.Discord, "discord_ping.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
		{dedupe.OneBot, "onebot_group_message.json", nil, dedupe.Key{Channel: "onebot", MessageID: "3170000123:-2117483012"}, nil},
		{dedupe.OneBot, "onebot_group_recall.json", nil, dedupe.Key{}, dedupe.ErrNoMessageID},
		{dedupe.OneBot, "onebot_heartbeat.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
		{dedupe.QQ, "qq_group_at_message.json", nil, dedupe.Key{Channel: "qq", MessageID: "GROUP_AT_MESSAGE_CREATE:ot3lpp6cmlvqxuhuaxkeg6tyg6wa4ubyjc1vv4z3agmb6qdczc7vdpgfcmfwm"}, nil},
		{dedupe.QQ, "qq_validation.json", nil, dedupe.Key{}, dedupe.ErrNotAMessage},
	}
	for _, tt := range tests {
		name := tt.preset.Name + "/" + strings.TrimSuffix(tt.fixture, ".json")
		if tt.header != nil {
			name += "/retry"
		}
		t.Run(name, func(t *testing.T) {
			body := fixture(t, tt.fixture)
			orig := bytes.Clone(body)
			got, err := tt.preset.Extract(body, tt.header)
			if !bytes.Equal(body, orig) {
				t.Error("Extract modified the body")
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Extract = %v, %v; want an error matching %v", got, err, tt.wantErr)
				}
				if !errors.Is(err, dedupe.ErrNoMessageID) {
					t.Errorf("error %v does not match ErrNoMessageID", err)
				}
				if got != (dedupe.Key{}) {
					t.Errorf("Extract returned key %v with error %v", got, err)
				}
				if tt.wantErr == dedupe.ErrNoMessageID && errors.Is(err, dedupe.ErrNotAMessage) {
					t.Errorf("error %v matches ErrNotAMessage; a delivery without an id is not a protocol request", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Extract = %#v, want %#v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFeishuPushesShareMessageKey checks that two pushes of one message with
// different event ids give one key, which is the point of keying on the
// message id.
func TestFeishuPushesShareMessageKey(t *testing.T) {
	var ids [2]string
	var keys [2]dedupe.Key
	for i, name := range []string{"feishu_message_push1.json", "feishu_message_push2.json"} {
		body := fixture(t, name)
		var env struct {
			Header struct {
				EventID string `json:"event_id"`
			} `json:"header"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		ids[i] = env.Header.EventID
		k, err := dedupe.Feishu.Extract(body, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	if ids[0] == ids[1] {
		t.Fatalf("fixtures share event_id %q; they must differ", ids[0])
	}
	if keys[0] != keys[1] {
		t.Fatalf("pushes with event ids %q and %q gave keys %v and %v; want one key", ids[0], ids[1], keys[0], keys[1])
	}
}

// TestPresetBodies covers hand-written bodies: exact large ids, zero and
// missing ids, ids of the wrong type, and bodies that are not JSON.
func TestPresetBodies(t *testing.T) {
	const (
		noID    = "no id"
		invalid = "invalid"
		control = "not a message"
		badJSON = "bad json"
	)
	tests := []struct {
		name   string
		preset dedupe.Preset
		body   string
		want   string // the key's MessageID, or one of the error classes above
	}{
		{"telegram min", dedupe.Telegram, `{"update_id":1}`, "1"},
		{"telegram beyond 2^53", dedupe.Telegram, `{"update_id":9007199254740993}`, "9007199254740993"},
		{"telegram beyond uint64", dedupe.Telegram, `{"update_id":123456789012345678901234}`, "123456789012345678901234"},
		{"telegram as string", dedupe.Telegram, `{"update_id":"77"}`, "77"},
		{"telegram zero", dedupe.Telegram, `{"update_id":0}`, noID},
		{"telegram negative zero", dedupe.Telegram, `{"update_id":-0}`, noID},
		{"telegram null", dedupe.Telegram, `{"update_id":null}`, noID},
		{"telegram false", dedupe.Telegram, `{"update_id":false}`, noID},
		{"telegram empty string", dedupe.Telegram, `{"update_id":""}`, noID},
		{"telegram missing", dedupe.Telegram, `{"message":{"message_id":5}}`, noID},
		{"telegram fraction", dedupe.Telegram, `{"update_id":1.5}`, invalid},
		{"telegram exponent", dedupe.Telegram, `{"update_id":1e3}`, invalid},
		{"telegram true", dedupe.Telegram, `{"update_id":true}`, invalid},
		{"telegram object", dedupe.Telegram, `{"update_id":{"id":1}}`, invalid},
		{"telegram array", dedupe.Telegram, `{"update_id":[1]}`, invalid},
		{"telegram empty body", dedupe.Telegram, ``, badJSON},
		{"telegram not json", dedupe.Telegram, `update_id=5`, badJSON},
		{"telegram truncated", dedupe.Telegram, `{"update_id":5`, badJSON},
		{"telegram trailing garbage", dedupe.Telegram, `{"update_id":5}x`, badJSON},
		{"telegram array body", dedupe.Telegram, `[{"update_id":5}]`, badJSON},
		{"telegram null body", dedupe.Telegram, `null`, noID},

		{"slack escaped id", dedupe.Slack, `{"type":"event_callback","event_id":"Ev\u0030A"}`, "Ev0A"},
		{"slack control char", dedupe.Slack, `{"type":"event_callback","event_id":"Ev\u0001"}`, invalid},
		{"slack no event_id", dedupe.Slack, `{"type":"event_callback","event":{}}`, noID},
		{"slack type not a string", dedupe.Slack, `{"type":5,"event_id":"Ev1"}`, badJSON},
		{"slack form body", dedupe.Slack, `payload=%7B%22type%22%3A%22block_actions%22%7D`, badJSON},

		{"feishu message without id", dedupe.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"message":{}}}`, noID},
		{"feishu other event", dedupe.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_type":"contact.user.created_v3"},"event":{}}`, "e1"},
		{"feishu 1.0 non-message", dedupe.Feishu, `{"uuid":"u1","type":"event_callback","event":{"type":"add_bot"}}`, "u1"},
		{"feishu empty object", dedupe.Feishu, `{}`, noID},

		{"discord numeric snowflake", dedupe.Discord, `{"type":2,"id":1187654321098765432}`, "1187654321098765432"},
		{"discord max snowflake", dedupe.Discord, `{"type":3,"id":"18446744073709551615"}`, "18446744073709551615"},
		{"discord zero", dedupe.Discord, `{"type":2,"id":0}`, noID},
		{"discord missing", dedupe.Discord, `{"type":2}`, noID},
		{"discord ping by number only", dedupe.Discord, `{"type":"1","id":"5"}`, "5"},

		{"onebot message_sent", dedupe.OneBot, `{"post_type":"message_sent","self_id":10001,"message_id":42}`, "10001:42"},
		{"onebot string ids", dedupe.OneBot, `{"post_type":"message","self_id":"10001","message_id":"a:b"}`, "10001:a:b"},
		{"onebot no self_id", dedupe.OneBot, `{"post_type":"message","message_id":42}`, noID},
		{"onebot zero self_id", dedupe.OneBot, `{"post_type":"message","self_id":0,"message_id":42}`, noID},
		{"onebot zero message_id", dedupe.OneBot, `{"post_type":"message","self_id":10001,"message_id":0}`, noID},
		{"onebot request", dedupe.OneBot, `{"post_type":"request","request_type":"friend","self_id":10001,"flag":"f1"}`, noID},
		{"onebot fraction", dedupe.OneBot, `{"post_type":"message","self_id":10001,"message_id":4.2}`, invalid},

		{"qq no op", dedupe.QQ, `{"id":"E1","d":{}}`, "E1"},
		{"qq op 12", dedupe.QQ, `{"op":12,"d":0}`, control},
		{"qq dispatch without id", dedupe.QQ, `{"op":0,"t":"C2C_MESSAGE_CREATE","d":{"id":"m1"}}`, noID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.preset.Extract([]byte(tt.body), nil)
			switch tt.want {
			case noID:
				if !errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrNotAMessage) || errors.Is(err, dedupe.ErrInvalidKey) {
					t.Fatalf("Extract = %v, %v; want ErrNoMessageID alone", got, err)
				}
			case invalid:
				if !errors.Is(err, dedupe.ErrInvalidKey) || errors.Is(err, dedupe.ErrNoMessageID) {
					t.Fatalf("Extract = %v, %v; want ErrInvalidKey", got, err)
				}
			case control:
				if !errors.Is(err, dedupe.ErrNotAMessage) {
					t.Fatalf("Extract = %v, %v; want ErrNotAMessage", got, err)
				}
			case badJSON:
				var syntax *json.SyntaxError
				var typ *json.UnmarshalTypeError
				if !errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrNotAMessage) ||
					!(errors.As(err, &syntax) || errors.As(err, &typ)) {
					t.Fatalf("Extract = %v, %v; want ErrNoMessageID wrapping the JSON error", got, err)
				}
				if !strings.Contains(err.Error(), tt.preset.Name+" body is not the expected JSON") {
					t.Errorf("error %q does not say the body is not JSON", err)
				}
			default:
				if err != nil {
					t.Fatalf("Extract: %v", err)
				}
				want := dedupe.Key{Channel: tt.preset.Name, MessageID: tt.want}
				if got != want {
					t.Fatalf("Extract = %#v, want %#v", got, want)
				}
				return
			}
			if got != (dedupe.Key{}) {
				t.Errorf("Extract returned key %v with error %v", got, err)
			}
			if !strings.HasPrefix(err.Error(), "dedupe: ") {
				t.Errorf("error %q lacks the \"dedupe: \" prefix", err)
			}
		})
	}
}

func TestPresetRenamedPerBot(t *testing.T) {
	bot2 := dedupe.Telegram
	bot2.Name = "telegram-bot2"
	body := []byte(`{"update_id":5}`)
	k1, err1 := dedupe.Telegram.Extract(body, nil)
	k2, err2 := bot2.Extract(body, nil)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if k1 == k2 || k2 != (dedupe.Key{Channel: "telegram-bot2", MessageID: "5"}) {
		t.Fatalf("keys %v and %v; want one per bot", k1, k2)
	}
	if dedupe.Telegram.Name != "telegram" {
		t.Fatal("copying a preset changed the package's preset")
	}

	bad := dedupe.Telegram
	bad.Name = "tele:gram"
	if _, err := bad.Extract(body, nil); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Fatalf("channel with ':' gave %v, want ErrInvalidKey", err)
	}
	if _, err := (dedupe.Preset{Name: "custom"}).Extract(body, nil); !errors.Is(err, dedupe.ErrNoMessageID) {
		t.Fatalf("preset without MessageID gave %v, want ErrNoMessageID", err)
	}
}

func TestPresetCustom(t *testing.T) {
	p := dedupe.Preset{
		Name: "web",
		TTL:  time.Minute,
		MessageID: func(_ []byte, h http.Header) (string, error) {
			return h.Get("Idempotency-Key"), nil
		},
	}
	h := http.Header{}
	h.Set("Idempotency-Key", "req-1")
	if k, err := p.Extract(nil, h); err != nil || k != (dedupe.Key{Channel: "web", MessageID: "req-1"}) {
		t.Fatalf("Extract = %v, %v", k, err)
	}
	if _, err := p.Extract(nil, nil); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Fatalf("empty id gave %v, want ErrInvalidKey", err)
	}
}

// TestPresetTTLs pins each TTL against the redelivery window it must outlast.
func TestPresetTTLs(t *testing.T) {
	minimum := map[string]time.Duration{
		"telegram": 24 * time.Hour,                                           // updates kept up to 24 h
		"slack":    10 * time.Minute,                                         // retries at ~0, +1 and +5 min
		"feishu":   15*time.Second + 5*time.Minute + time.Hour + 6*time.Hour, // retry schedule
		"discord":  15 * time.Minute,                                         // interaction token lifetime
		"onebot":   time.Minute,                                              // copies seconds apart
		"qq":       24 * time.Hour,                                           // no documented schedule: the default
	}
	ps := dedupe.Presets()
	if len(ps) != len(minimum) {
		t.Fatalf("Presets() has %d presets, want %d", len(ps), len(minimum))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Name] {
			t.Errorf("preset name %q twice", p.Name)
		}
		seen[p.Name] = true
		min, ok := minimum[p.Name]
		if !ok {
			t.Errorf("unexpected preset %q", p.Name)
			continue
		}
		if p.TTL < min {
			t.Errorf("%s TTL %v is under its redelivery window %v", p.Name, p.TTL, min)
		}
		if p.MessageID == nil {
			t.Errorf("%s has no MessageID func", p.Name)
		}
		if _, err := dedupe.ParseKey(p.Name + ":1"); err != nil {
			t.Errorf("%s is not a valid channel: %v", p.Name, err)
		}
	}
	ps[0].Name = "changed"
	if dedupe.Presets()[0].Name != "telegram" {
		t.Error("Presets returned a slice shared between calls")
	}
}

func TestErrNotAMessage(t *testing.T) {
	if !errors.Is(dedupe.ErrNotAMessage, dedupe.ErrNoMessageID) {
		t.Error("ErrNotAMessage does not match ErrNoMessageID")
	}
	if errors.Is(dedupe.ErrNoMessageID, dedupe.ErrNotAMessage) {
		t.Error("ErrNoMessageID matches ErrNotAMessage")
	}
	if got := dedupe.ErrNotAMessage.Error(); got != "dedupe: not a message" {
		t.Errorf("Error() = %q", got)
	}
}

// TestPresetExtractAllocs proves the presets allocation-light: decoding only
// the fields they need costs a small fraction of the allocations of decoding
// the whole body into a map.
func TestPresetExtractAllocs(t *testing.T) {
	for _, c := range extractCases {
		body := fixture(t, c.fixture)
		preset := testing.AllocsPerRun(50, func() {
			if _, err := c.preset.Extract(body, nil); err != nil {
				t.Fatal(err)
			}
		})
		baseline := testing.AllocsPerRun(50, func() {
			if _, err := baselineKey(c.preset.Name, body, c.path); err != nil {
				t.Fatal(err)
			}
		})
		if preset > 16 || preset > baseline/4 {
			t.Errorf("%s: %v allocs per Extract, baseline %v; want at most 16 and a quarter of the baseline", c.preset.Name, preset, baseline)
		}
	}
}

// FuzzPresetExtract checks that every preset either returns a valid key with
// its channel or an error in one of the documented classes, on any body.
func FuzzPresetExtract(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "platforms"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		f.Add(fixture(f, e.Name()))
	}
	f.Add([]byte(`{"update_id":1e400}`))
	f.Add([]byte(`{"post_type":"message","self_id":-1,"message_id":"\ud800"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range dedupe.Presets() {
			k, err := p.Extract(body, nil)
			if err != nil {
				if !errors.Is(err, dedupe.ErrNoMessageID) && !errors.Is(err, dedupe.ErrInvalidKey) {
					t.Fatalf("%s: error %v is in no documented class", p.Name, err)
				}
				continue
			}
			if k.Channel != p.Name {
				t.Fatalf("%s: key %v has another channel", p.Name, k)
			}
			if err := k.Validate(); err != nil {
				t.Fatalf("%s: key %v: %v", p.Name, k, err)
			}
		}
	})
}

// baselineKey is the naive way: decode the whole body into a map, with
// UseNumber so ids stay exact, walk to the object holding the id and let
// ExtractKey read it.
func baselineKey(channel string, body []byte, path []string) (dedupe.Key, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return dedupe.Key{}, err
	}
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return dedupe.Key{}, dedupe.ErrNoMessageID
		}
		m = next
	}
	if field := path[len(path)-1]; field != "message_id" {
		m = map[string]any{"message_id": m[field]}
	}
	return dedupe.ExtractKey(channel, m)
}

// extractCases are the fixtures the benchmarks and the allocation test run,
// with the path to the id for the baseline.
var extractCases = []struct {
	preset  dedupe.Preset
	fixture string
	path    []string
}{
	{dedupe.Telegram, "telegram_message.json", []string{"update_id"}},
	{dedupe.Slack, "slack_event_callback.json", []string{"event_id"}},
	{dedupe.Feishu, "feishu_message_push1.json", []string{"event", "message", "message_id"}},
	{dedupe.Discord, "discord_application_command.json", []string{"id"}},
	{dedupe.OneBot, "onebot_group_message.json", []string{"message_id"}},
	{dedupe.QQ, "qq_group_at_message.json", []string{"id"}},
}

func BenchmarkPresetExtract(b *testing.B) {
	for _, c := range extractCases {
		body := fixture(b, c.fixture)
		b.Run(c.preset.Name+"/preset", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := c.preset.Extract(body, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.preset.Name+"/map-baseline", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := baselineKey(c.preset.Name, body, c.path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
