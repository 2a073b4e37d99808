package platform_test

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
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
		preset  platform.Preset
		fixture string
		header  http.Header
		want    dedupe.Key
		wantErr error // checked with errors.Is when set
	}{
		{platform.Telegram, "telegram_message.json", nil, dedupe.Key{Channel: "telegram", MessageID: "912345678"}, nil},
		{platform.Telegram, "telegram_callback_query.json", nil, dedupe.Key{Channel: "telegram", MessageID: "912345679"}, nil},
		{platform.Slack, "slack_event_callback.json", nil, dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}, nil},
		{platform.Slack, "slack_event_callback.json", slackRetry, dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}, nil},
		{platform.Slack, "slack_url_verification.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
		{platform.Slack, "slack_app_rate_limited.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
		{platform.Slack, "slack_block_actions.form", nil, dedupe.Key{Channel: "slack", MessageID: "8123456789012.6051234567.3b8e4e2c1c0d5e2b9c1a7f0e6d5c4b3a"}, nil},
		{platform.Slack, "slack_slash_command.form", nil, dedupe.Key{Channel: "slack", MessageID: "13345224609.738474920.8088930838d88f008e0"}, nil},
		{platform.Feishu, "feishu_card_action.json", nil, dedupe.Key{Channel: "feishu", MessageID: "f7984f25108f8137722bb63cee927e66"}, nil},
		{platform.Feishu, "feishu_message_push1.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_5ce6d572455d361153b7cb51da133945"}, nil},
		{platform.Feishu, "feishu_message_push2.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_5ce6d572455d361153b7cb51da133945"}, nil},
		{platform.Feishu, "feishu_reaction.json", nil, dedupe.Key{Channel: "feishu", MessageID: "8fe33a2bc9c5ab7d6a1b1f1c2b52a1e7"}, nil},
		{platform.Feishu, "feishu_v1_message.json", nil, dedupe.Key{Channel: "feishu", MessageID: "om_36f8c7f4f8b5d1a84b2e7b0e1a3c9d21"}, nil},
		{platform.Feishu, "feishu_url_verification.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
		{platform.Feishu, "feishu_encrypted.json", nil, dedupe.Key{}, dedupe.ErrNoMessageID},
		{platform.Discord, "discord_application_command.json", nil, dedupe.Key{Channel: "discord", MessageID: "1187654321098765432"}, nil},
		{platform.Discord, "discord_ping.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
		{platform.OneBot, "onebot_group_message.json", nil, dedupe.Key{Channel: "onebot", MessageID: "3170000123:-2117483012"}, nil},
		{platform.OneBot, "onebot_group_recall.json", nil, dedupe.Key{}, dedupe.ErrNoMessageID},
		{platform.OneBot, "onebot_heartbeat.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
		{platform.QQ, "qq_group_at_message.json", nil, dedupe.Key{Channel: "qq", MessageID: "GROUP_AT_MESSAGE_CREATE:ot3lpp6cmlvqxuhuaxkeg6tyg6wa4ubyjc1vv4z3agmb6qdczc7vdpgfcmfwm"}, nil},
		{platform.QQ, "qq_validation.json", nil, dedupe.Key{}, platform.ErrNotAMessage},
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
			assert.Equal(t, orig, body, "Extract modified the body")
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				require.NoError(t, got.Validate())
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorIs(t, err, dedupe.ErrNoMessageID)
			assert.Zero(t, got, "Extract returned a key with an error")
			if tt.wantErr == dedupe.ErrNoMessageID {
				assert.NotErrorIs(t, err, platform.ErrNotAMessage,
					"a delivery without an id is not a protocol request")
			}
		})
	}
}

// TestPresetNilHeader checks that every preset extracts from the body alone,
// as a WebSocket client (OneBot over WebSocket, say) calls it, with no
// header: a nil header gives what an empty and a full one give.
func TestPresetNilHeader(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	full := http.Header{}
	full.Set("Content-Type", "application/json")
	full.Set("X-Slack-Retry-Num", "1")
	for _, p := range platform.Presets() {
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			body := fixture(t, e.Name())
			t.Run(p.Name+"/"+strings.TrimSuffix(e.Name(), ".json"), func(t *testing.T) {
				var (
					got    dedupe.Key
					gotErr error
				)
				require.NotPanics(t, func() { got, gotErr = p.Extract(body, nil) })
				for _, h := range []http.Header{{}, full} {
					want, wantErr := p.Extract(body, h)
					assert.Equal(t, want, got)
					assert.Equal(t, wantErr, gotErr)
				}
			})
		}
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
		require.NoError(t, json.Unmarshal(body, &env))
		ids[i] = env.Header.EventID
		k, err := platform.Feishu.Extract(body, nil)
		require.NoError(t, err)
		keys[i] = k
	}
	require.NotEqual(t, ids[0], ids[1], "the fixtures must have different event ids")
	require.Equal(t, keys[0], keys[1], "pushes with event ids %q and %q must give one key", ids[0], ids[1])
}

// Error classes of bodyCases.
const (
	noID    = "no id"
	invalid = "invalid"
	control = "not a message"
	badJSON = "bad json"
)

// bodyCases are hand-written bodies: exact large ids, zero and missing ids, ids
// of the wrong type, and bodies that are not JSON.
var bodyCases = []struct {
	name   string
	preset platform.Preset
	body   string
	want   string // the key's MessageID, or one of the error classes above
}{
	{"telegram min", platform.Telegram, `{"update_id":1}`, "1"},
	{"telegram beyond 2^53", platform.Telegram, `{"update_id":9007199254740993}`, "9007199254740993"},
	{"telegram beyond uint64", platform.Telegram, `{"update_id":123456789012345678901234}`, "123456789012345678901234"},
	{"telegram as string", platform.Telegram, `{"update_id":"77"}`, "77"},
	{"telegram zero", platform.Telegram, `{"update_id":0}`, noID},
	{"telegram negative zero", platform.Telegram, `{"update_id":-0}`, noID},
	{"telegram null", platform.Telegram, `{"update_id":null}`, noID},
	{"telegram false", platform.Telegram, `{"update_id":false}`, noID},
	{"telegram empty string", platform.Telegram, `{"update_id":""}`, noID},
	{"telegram missing", platform.Telegram, `{"message":{"message_id":5}}`, noID},
	{"telegram fraction", platform.Telegram, `{"update_id":1.5}`, invalid},
	{"telegram exponent", platform.Telegram, `{"update_id":1e3}`, invalid},
	{"telegram true", platform.Telegram, `{"update_id":true}`, invalid},
	{"telegram object", platform.Telegram, `{"update_id":{"id":1}}`, invalid},
	{"telegram array", platform.Telegram, `{"update_id":[1]}`, invalid},
	{"telegram empty body", platform.Telegram, ``, badJSON},
	{"telegram not json", platform.Telegram, `update_id=5`, badJSON},
	{"telegram truncated", platform.Telegram, `{"update_id":5`, badJSON},
	{"telegram trailing garbage", platform.Telegram, `{"update_id":5}x`, badJSON},
	{"telegram array body", platform.Telegram, `[{"update_id":5}]`, badJSON},
	{"telegram null body", platform.Telegram, `null`, noID},

	{"slack escaped id", platform.Slack, `{"type":"event_callback","event_id":"Ev\u0030A"}`, "Ev0A"},
	{"slack control char", platform.Slack, `{"type":"event_callback","event_id":"Ev\u0001"}`, invalid},
	{"slack no event_id", platform.Slack, `{"type":"event_callback","event":{}}`, noID},
	{"slack type not a string", platform.Slack, `{"type":5,"event_id":"Ev1"}`, badJSON},
	{"slack interaction without trigger_id", platform.Slack, `payload=%7B%22type%22%3A%22block_actions%22%7D`, noID},
	{"slack interaction", platform.Slack, `payload=%7B%22type%22%3A%22view_submission%22%2C%22trigger_id%22%3A%221.2.ab%22%7D`, "1.2.ab"},
	{"slack view_closed", platform.Slack, `payload=%7B%22type%22%3A%22view_closed%22%2C%22view%22%3A%7B%7D%7D`, noID},
	{"slack block_suggestion", platform.Slack, `payload=%7B%22type%22%3A%22block_suggestion%22%2C%22value%22%3A%22ab%22%7D`, control},
	{"slack payload twice", platform.Slack, `payload=%7B%22trigger_id%22%3A%221%22%7D&payload=%7B%22trigger_id%22%3A%222%22%7D`, invalid},
	{"slack payload not json", platform.Slack, `payload=%7Bnope`, badJSON},
	{"slack command", platform.Slack, `command=%2Fask&text=hi&trigger_id=1.2.cd`, "1.2.cd"},
	{"slack command without trigger_id", platform.Slack, `command=%2Fask&text=hi`, noID},
	{"slack command trigger_id twice", platform.Slack, `command=%2Fask&trigger_id=1&trigger_id=2`, invalid},
	{"slack command trigger_id not UTF-8", platform.Slack, `command=%2Fask&trigger_id=%FF`, invalid},
	{"slack ssl_check", platform.Slack, `ssl_check=1&token=XXYYZZ`, control},
	{"slack other form", platform.Slack, `token=XXYYZZ&text=hi`, badJSON},
	{"slack bad form encoding", platform.Slack, `command=%2Fask&trigger_id=%zz`, badJSON},

	{"feishu message without id", platform.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"message":{}}}`, noID},
	{"feishu other event", platform.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_type":"contact.user.created_v3"},"event":{}}`, "e1"},
	{"feishu 1.0 non-message", platform.Feishu, `{"uuid":"u1","type":"event_callback","event":{"type":"add_bot"}}`, "u1"},
	{"feishu empty object", platform.Feishu, `{}`, noID},

	{"discord numeric snowflake", platform.Discord, `{"type":2,"id":1187654321098765432}`, "1187654321098765432"},
	{"discord max snowflake", platform.Discord, `{"type":3,"id":"18446744073709551615"}`, "18446744073709551615"},
	{"discord zero", platform.Discord, `{"type":2,"id":0}`, noID},
	{"discord missing", platform.Discord, `{"type":2}`, noID},
	{"discord ping by number only", platform.Discord, `{"type":"1","id":"5"}`, "5"},

	{"onebot message_sent", platform.OneBot, `{"post_type":"message_sent","self_id":10001,"message_id":42}`, "10001:42"},
	{"onebot string ids", platform.OneBot, `{"post_type":"message","self_id":"10001","message_id":"a:b"}`, "10001:a:b"},
	{"onebot no self_id", platform.OneBot, `{"post_type":"message","message_id":42}`, noID},
	{"onebot zero self_id", platform.OneBot, `{"post_type":"message","self_id":0,"message_id":42}`, noID},
	{"onebot zero message_id", platform.OneBot, `{"post_type":"message","self_id":10001,"message_id":0}`, noID},
	{"onebot request", platform.OneBot, `{"post_type":"request","request_type":"friend","self_id":10001,"flag":"f1"}`, noID},
	{"onebot fraction", platform.OneBot, `{"post_type":"message","self_id":10001,"message_id":4.2}`, invalid},

	{"qq no op", platform.QQ, `{"id":"E1","d":{}}`, "E1"},
	{"qq op 12", platform.QQ, `{"op":12,"d":0}`, control},
	{"qq dispatch without id", platform.QQ, `{"op":0,"t":"C2C_MESSAGE_CREATE","d":{"id":"m1"}}`, noID},
}

// TestPresetBodies runs the presets on bodyCases.
func TestPresetBodies(t *testing.T) {
	for _, tt := range bodyCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.preset.Extract([]byte(tt.body), nil)
			switch tt.want {
			case noID:
				require.ErrorIs(t, err, dedupe.ErrNoMessageID)
				require.NotErrorIs(t, err, platform.ErrNotAMessage)
				require.NotErrorIs(t, err, dedupe.ErrInvalidKey)
			case invalid:
				require.ErrorIs(t, err, dedupe.ErrInvalidKey)
				require.NotErrorIs(t, err, dedupe.ErrNoMessageID)
			case control:
				require.ErrorIs(t, err, platform.ErrNotAMessage)
			case badJSON:
				var syntax *json.SyntaxError
				var typ *json.UnmarshalTypeError
				require.ErrorIs(t, err, dedupe.ErrNoMessageID)
				require.NotErrorIs(t, err, platform.ErrNotAMessage)
				require.True(t, errors.As(err, &syntax) || errors.As(err, &typ),
					"error %v does not wrap the JSON error", err)
				assert.Contains(t, err.Error(), tt.preset.Name+" body is not the expected JSON")
			default:
				require.NoError(t, err)
				require.Equal(t, dedupe.Key{Channel: tt.preset.Name, MessageID: tt.want}, got)
				return
			}
			assert.Zero(t, got, "Extract returned a key with an error")
			assert.True(t, strings.HasPrefix(err.Error(), "dedupe: "), "error %q lacks the \"dedupe: \" prefix", err)
		})
	}
}

func TestPresetRenamedPerBot(t *testing.T) {
	bot2 := platform.Telegram
	bot2.Name = "telegram-bot2"
	body := []byte(`{"update_id":5}`)
	k1, err := platform.Telegram.Extract(body, nil)
	require.NoError(t, err)
	k2, err := bot2.Extract(body, nil)
	require.NoError(t, err)
	require.NotEqual(t, k1, k2, "want one key per bot")
	require.Equal(t, dedupe.Key{Channel: "telegram-bot2", MessageID: "5"}, k2)
	require.Equal(t, "telegram", platform.Telegram.Name, "copying a preset changed the package's preset")

	bad := platform.Telegram
	bad.Name = "tele:gram"
	_, err = bad.Extract(body, nil)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey, "channel with ':'")
	_, err = platform.Preset{Name: "custom"}.Extract(body, nil)
	require.ErrorIs(t, err, dedupe.ErrNoMessageID, "preset without MessageID")
}

func TestPresetCustom(t *testing.T) {
	p := platform.Preset{
		Name: "web",
		TTL:  time.Minute,
		MessageID: func(_ []byte, h http.Header) (string, error) {
			return h.Get("Idempotency-Key"), nil
		},
	}
	h := http.Header{}
	h.Set("Idempotency-Key", "req-1")
	k, err := p.Extract(nil, h)
	require.NoError(t, err)
	require.Equal(t, dedupe.Key{Channel: "web", MessageID: "req-1"}, k)
	_, err = p.Extract(nil, nil)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey, "empty id")
}

// TestPresetTTLs pins each TTL against the redelivery window it must outlast.
func TestPresetTTLs(t *testing.T) {
	minimum := map[string]time.Duration{
		"telegram":        24 * time.Hour,                                           // updates kept up to 24 h
		"slack":           10 * time.Minute,                                         // retries at ~0, +1 and +5 min
		"feishu":          15*time.Second + 5*time.Minute + time.Hour + 6*time.Hour, // retry schedule
		"discord":         15 * time.Minute,                                         // interaction token lifetime
		"onebot":          time.Minute,                                              // copies seconds apart
		"qq":              24 * time.Hour,                                           // no documented schedule: the default
		"line":            24 * time.Hour,                                           // no published redelivery schedule: the default
		"meta":            7 * 24 * time.Hour,                                       // WhatsApp retries for up to 7 days
		"matrix":          24 * time.Hour,                                           // retries until 200, no end named: the default
		"wechat":          15 * time.Second,                                         // three retries, 5 s apart
		"wecom":           15 * time.Second,                                         // three retries, 5 s apart
		"dingtalk":        time.Hour,                                                // the signed timestamp's window
		"dingtalk-events": 24 * time.Hour,                                           // no published schedule: the default
		"webhooks":        75*time.Hour + 35*time.Minute,                            // the spec's example retry schedule
		"github":          3 * 24 * time.Hour,                                       // manual redelivery within 3 days
		"stripe":          3 * 24 * time.Hour,                                       // live-mode retries for up to 3 days
	}
	ps := platform.Presets()
	require.Len(t, ps, len(minimum))
	seen := map[string]bool{}
	for _, p := range ps {
		assert.False(t, seen[p.Name], "preset name %q twice", p.Name)
		seen[p.Name] = true
		min, ok := minimum[p.Name]
		if !assert.True(t, ok, "unexpected preset %q", p.Name) {
			continue
		}
		assert.GreaterOrEqual(t, p.TTL, min, "%s TTL is under its redelivery window", p.Name)
		assert.NotNil(t, p.MessageID, "%s has no MessageID func", p.Name)
		_, err := dedupe.ParseKey(p.Name + ":1")
		assert.NoError(t, err, "%s is not a valid channel", p.Name)
	}
	ps[0].Name = "changed"
	assert.Equal(t, "telegram", platform.Presets()[0].Name, "Presets returned a slice shared between calls")
}

func TestErrNotAMessage(t *testing.T) {
	assert.ErrorIs(t, platform.ErrNotAMessage, dedupe.ErrNoMessageID)
	assert.NotErrorIs(t, dedupe.ErrNoMessageID, platform.ErrNotAMessage)
	assert.EqualError(t, platform.ErrNotAMessage, "dedupe: platform: not a message")
}

// TestPresetExtractAllocs proves the presets allocation-light: decoding only
// the fields they need costs a small fraction of the allocations of decoding
// the whole body into a map.
func TestPresetExtractAllocs(t *testing.T) {
	for _, c := range extractCases {
		body := fixture(t, c.fixture)
		preset := testing.AllocsPerRun(50, func() {
			_, err := c.preset.Extract(body, nil)
			require.NoError(t, err)
		})
		baseline := testing.AllocsPerRun(50, func() {
			_, err := baselineKey(c.preset.Name, body, c.path)
			require.NoError(t, err)
		})
		assert.LessOrEqual(t, preset, 16.0, "%s: allocs per Extract", c.preset.Name)
		assert.LessOrEqual(t, preset, baseline/4, "%s: allocs per Extract, against the baseline's quarter", c.preset.Name)
	}
}

// FuzzPresetExtract checks that every preset either returns a valid key with
// its channel or an error in one of the documented classes, on any body.
func FuzzPresetExtract(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	require.NoError(f, err)
	for _, e := range entries {
		if !e.IsDir() {
			f.Add(fixture(f, e.Name()))
		}
	}
	f.Add([]byte(`{"update_id":1e400}`))
	f.Add([]byte(`{"post_type":"message","self_id":-1,"message_id":"\ud800"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range platform.Presets() {
			k, err := p.Extract(body, nil)
			if err != nil {
				require.True(t, errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrInvalidKey),
					"%s: error %v is in no documented class", p.Name, err)
				continue
			}
			require.Equal(t, p.Name, k.Channel, "%s: key %v has another channel", p.Name, k)
			require.NoError(t, k.Validate(), "%s: key %v", p.Name, k)
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
	preset  platform.Preset
	fixture string
	path    []string
}{
	{platform.Telegram, "telegram_message.json", []string{"update_id"}},
	{platform.Slack, "slack_event_callback.json", []string{"event_id"}},
	{platform.Feishu, "feishu_message_push1.json", []string{"event", "message", "message_id"}},
	{platform.Discord, "discord_application_command.json", []string{"id"}},
	{platform.OneBot, "onebot_group_message.json", []string{"message_id"}},
	{platform.QQ, "qq_group_at_message.json", []string{"id"}},
	{platform.Stripe, "stripe_event.json", []string{"id"}}, // a Rule's JSON Pointer
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
