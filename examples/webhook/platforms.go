package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gatewaykit/dedupe/platform"
)

// A secretFlag is where one source's secret comes from: the flag
// -{name}-secret, else the environment variable env, else a demo value.
type secretFlag struct {
	name, env, def, usage string
}

// secretFlags lists every source the gateway serves, in the order of
// platform.Presets, then the source built from a rule (-rule). The three
// platforms that encrypt with WXBizMsgCrypt take "token,EncodingAESKey,id".
// Each default is a secret of the form the platform's own has, so that
// -serve accepts it.
var secretFlags = []secretFlag{
	{"telegram", "TELEGRAM_WEBHOOK_SECRET", "demo-telegram-secret", "Telegram webhook secret_token (setWebhook)"},
	{"slack", "SLACK_SIGNING_SECRET", "demo-slack-signing-secret", "Slack signing secret"},
	{"feishu", "FEISHU_ENCRYPT_KEY", "demo-feishu-encrypt-key", "Feishu/Lark Encrypt Key"},
	{"discord", "DISCORD_PUBLIC_KEY", "9be1f3b2bd0ac7be392346cd4156c83ebf8b020cd9baf598d45fa510363bcfd2", "Discord application public key, hex"},
	{"onebot", "ONEBOT_SECRET", "demo-onebot-secret", "OneBot 11 HTTP POST secret"},
	{"qq", "QQ_BOT_SECRET", "demo-qq-bot-secret", "QQ official bot AppSecret"},
	{"line", "LINE_CHANNEL_SECRET", "demo-line-channel-secret", "LINE channel secret"},
	{"meta", "META_APP_SECRET", "demo-meta-app-secret", "Meta App Secret (WhatsApp, Messenger, Instagram)"},
	{"matrix", "MATRIX_HS_TOKEN", "demo-matrix-hs-token", "Matrix application service hs_token"},
	{"wechat", "WECHAT_MSGCRYPT", "demo-wechat-token,lE0Zu64ZmyHy610X/ERYs/dKKU1craWNFatTHyIQULw,wxdemoappid", "WeChat Official Account token,EncodingAESKey,AppID"},
	{"wecom", "WECOM_MSGCRYPT", "demo-wecom-token,MN9XHN4U+jn2PmXUBGhxHe6Je57aAHVgwlbtI+T6ayo,wwdemocorpid", "WeCom callback token,EncodingAESKey,CorpID"},
	{"dingtalk", "DINGTALK_APP_SECRET", "demo-dingtalk-app-secret", "DingTalk robot AppSecret"},
	{"dingtalk-events", "DINGTALK_EVENTS_MSGCRYPT", "demo-dingtalk-token,7QhGy3aSqSumuYjWLzTk+7vipYJhDvAWZ+kqso9BiRg,dingdemoappkey", "DingTalk event subscription token,aes_key,AppKey"},
	{"webhooks", "STANDARD_WEBHOOKS_SECRET", "whsec_ZGVtby1zdGFuZGFyZC13ZWJob29rcw==", "Standard Webhooks secret, whsec_… or whpk_…"},
	{"github", "GITHUB_WEBHOOK_SECRET", "demo-github-secret", "GitHub webhook secret"},
	{"stripe", "STRIPE_WEBHOOK_SECRET", "whsec_demo-stripe", "Stripe endpoint signing secret"},
	{"rule", "RULE_WEBHOOK_SECRET", "demo-shopify-client-secret", "secret of the source built from -rule (Shopify's client secret by default)"},
}

// msgCryptPlatforms take a WXBizMsgCrypt configuration instead of a secret.
var msgCryptPlatforms = map[string]bool{"wechat": true, "wecom": true, "dingtalk-events": true}

// shopifyRule is the source built from configuration when -rule names no
// file: Shopify's webhooks, which no preset of the platform package covers.
// Shopify signs the raw body with HMAC-SHA256 keyed with the app's client
// secret, in base64, in X-Shopify-Hmac-SHA256, and signs no timestamp (Verify
// webhook deliveries, https://shopify.dev/docs/apps/build/webhooks/verify-deliveries);
// "the X-Shopify-Event-Id header and the same value across more than one
// webhook indicates a duplicate" (Ignore duplicate webhooks,
// https://shopify.dev/apps/build/webhooks/ignore-duplicates). Shopify waits 5
// seconds for an answer and retries 8 times over the next 4 hours: a day
// covers them, and 3 seconds leave two to answer. The HMAC does not cover
// X-Shopify-Event-Id, so the rule says unsigned_id: a captured delivery
// posted again under another event id would run again, which only TLS
// prevents.
const shopifyRule = `{
	"name": "shopify",
	"id": "header:X-Shopify-Event-Id",
	"unsigned_id": true,
	"ttl": "24h",
	"ack_budget": "3s",
	"signature": {"header": "X-Shopify-Hmac-SHA256", "encoding": "base64"}
}`

// config is what the flags say.
type config struct {
	addr            string
	serve           bool
	secrets         map[string]string // by the names of secretFlags
	metaVerifyToken string            // Meta's subscription check
	ruleFile        string            // a Rule in JSON; empty: shopifyRule
}

// parseFlags reads the command line into a config.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	c := config{secrets: make(map[string]string, len(secretFlags))}
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "listen address")
	fs.BoolVar(&c.serve, "serve", false, "keep serving until interrupted instead of running the demo")
	fs.StringVar(&c.metaVerifyToken, "meta-verify-token", envOr("META_VERIFY_TOKEN", "demo-meta-verify-token"),
		"the Verify Token of Meta's webhook settings (env META_VERIFY_TOKEN)")
	fs.StringVar(&c.ruleFile, "rule", "", "a JSON file holding a platform.Rule, served on POST /{its name} (with -serve; default: Shopify's)")
	ptrs := make([]*string, len(secretFlags))
	for i, f := range secretFlags {
		ptrs[i] = fs.String(f.name+"-secret", envOr(f.env, f.def), f.usage+" (env "+f.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for i, f := range secretFlags {
		c.secrets[f.name] = *ptrs[i]
	}
	if c.ruleFile != "" && !c.serve {
		return c, fmt.Errorf("-rule is for -serve: the demo plays the built-in Shopify rule")
	}
	return c, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// loadRule returns the rule-built source of c, without its secret.
func loadRule(c config) (platform.Preset, error) {
	data := []byte(shopifyRule)
	if c.ruleFile != "" {
		var err error
		if data, err = os.ReadFile(c.ruleFile); err != nil {
			return platform.Preset{}, err
		}
	}
	var r platform.Rule
	if err := json.Unmarshal(data, &r); err != nil {
		return platform.Preset{}, fmt.Errorf("rule: %w", err)
	}
	return platform.NewPreset(r)
}

// sources returns every source the gateway serves, each with its secret:
// the presets of the platform package, then the rule-built one.
func sources(c config) ([]platform.Preset, error) {
	rule, err := loadRule(c)
	if err != nil {
		return nil, err
	}
	all := append(platform.Presets(), rule)
	for i, p := range all {
		name := p.Name
		if i == len(all)-1 {
			name = "rule"
		}
		all[i] = withSecret(p, c.secrets[name])
		if p.Name == platform.Meta.Name {
			all[i] = all[i].WithVerifyToken(c.metaVerifyToken)
		}
	}
	return all, nil
}

// withSecret gives p its secret: "token,EncodingAESKey,id" for the
// platforms that encrypt with WXBizMsgCrypt, the secret as it is otherwise.
func withSecret(p platform.Preset, secret string) platform.Preset {
	if !msgCryptPlatforms[p.Name] {
		return p.WithSecret(secret)
	}
	parts := strings.Split(secret, ",")
	if len(parts) != 3 {
		return p.WithMsgCrypt("", "", "") // refuses every delivery; CheckSecret says why
	}
	return p.WithMsgCrypt(parts[0], parts[1], parts[2])
}
