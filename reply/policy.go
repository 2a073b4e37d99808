package reply

import (
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Policy is what [Sender.Send] does with a reply whose last send ended with
// its outcome unknown: a timeout, a 5xx, a connection cut after the request
// was written, or a crash between the send and its record.
type Policy int

// The policies. A reply that was sent, or that the platform refused
// ([NotSent]), is never subject to them: the first is not sent again, the
// second always is.
const (
	// Native sends again with the same token: the platform drops a repeat
	// of a token it accepted within [Platform].Window, counted from where
	// the platform counts it ([Platform].WindowFromFirstRequest). Past the
	// window it behaves as AtMostOnce.
	Native Policy = iota + 1
	// AtMostOnce never sends again: Send returns an error matching
	// [ErrMaybeLost] and logs the reply as possibly lost.
	AtMostOnce
	// AtLeastOnce sends again: the [Receipt] says MaybeDuplicate and Send
	// logs the reply as possibly duplicated.
	AtLeastOnce
)

// String returns the policy's name: "native", "at-most-once",
// "at-least-once", or "policy(n)" for another value.
func (p Policy) String() string {
	switch p {
	case Native:
		return "native"
	case AtMostOnce:
		return "at-most-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// Platform describes a platform's send call: what a [Sender] does with a
// reply whose outcome is unknown, and the token it hands the [SendFunc] to
// put in the request. The presets below are values: copy one and change a
// field to describe another endpoint.
type Platform struct {
	// Name names the platform in logs and errors: "line", "discord",
	// "feishu", "wecom", "telegram", "slack".
	Name string
	// Policy is what Send does after an unknown outcome; 0 means
	// AtMostOnce. [WithPolicy] overrides it.
	Policy Policy
	// Window is how long after the first send of a token the platform
	// still drops a repeat of it (0: it never does). Past it, [Native]
	// behaves as [AtMostOnce].
	Window time.Duration
	// WindowFromFirstRequest says where Window starts. False (Discord,
	// Feishu, WeCom: a platform that drops a repeat of a message it
	// created): at the first send since the platform last refused the
	// reply ([NotSent]), as a refused request created nothing a repeat
	// could be matched with. True ([LINE]: the token's validity begins with
	// its first request, whatever the answer): at the first send of the
	// reply, refused ones included.
	WindowFromFirstRequest bool
	// Token returns the token of reply slot of the message key in the
	// platform's format; nil for a platform without one (the [Message]'s
	// Token is then "").
	Token func(key dedupe.Key, slot int) string
}

// LINE is the Messaging API's push, multicast, narrowcast and broadcast
// calls, with the token in the X-Line-Retry-Key header, a [UUID]. LINE's
// "Retry failed API requests"
// (https://developers.line.biz/en/docs/messaging-api/retrying-api-request/):
// "No matter how many times the API request containing the same value of a
// retry key (X-Line-Retry-Key) is executed, since it is always accepted only
// once, it prevents the same process from being duplicated. If the request
// has already been accepted, the re-request is blocked and the status code
// 409 is returned", and "The retry key is valid for 24 hours after
// attempting the first request." So a SendFunc treats 409 as sent (with no
// message id) and other 4xx as [NotSent], and the window runs from the
// first request with the key, a refused one (429, 400) included
// (WindowFromFirstRequest): a reply refused at first and sent again later,
// with its outcome unknown, is sent again only within 24 hours of that
// first request; past them the retry key may no longer block a repeat, and
// the reply is reported possibly lost ([ErrMaybeLost]) rather than risked
// twice. The reply API (replyToken) takes no retry key and is not covered.
var LINE = Platform{Name: "line", Policy: Native, Window: 24 * time.Hour, WindowFromFirstRequest: true, Token: UUID}

// Discord is Create Message (POST /channels/{channel.id}/messages) with the
// token as the nonce, a [Nonce] of 25 characters, and enforce_nonce set to
// true. Discord's docs
// (https://discord.com/developers/docs/resources/message#create-message):
// nonce "Can be used to verify a message was sent (up to 25 characters)";
// enforce_nonce: "If true and nonce is present, it will be checked for
// uniqueness in the past few minutes. If another message was created by the
// same author with the same nonce, that message will be returned and no new
// message will be created." As "a few minutes" is not a number, the window
// is a conservative 1 minute: past it, a reply whose send's outcome is
// unknown is reported possibly lost rather than risked twice.
var Discord = Platform{Name: "discord", Policy: Native, Window: time.Minute, Token: Nonce}

// Feishu is Feishu's and Lark's send message (POST
// /open-apis/im/v1/messages) with the token in the body's uuid field, a
// [UUID] (36 characters). Its docs
// (https://open.feishu.cn/document/server-docs/im-v1/message/create) say of
// uuid: a unique string the developer generates to deduplicate send
// requests; "持有相同uuid的请求1小时内至多成功发送一条消息" (requests with the
// same uuid send at most one message within 1 hour); at most 50 characters.
var Feishu = Platform{Name: "feishu", Policy: Native, Window: time.Hour, Token: UUID}

// WeCom is WeCom's application message call (POST /cgi-bin/message/send),
// which takes no token: its duplicate check is by content. Its docs
// (https://developer.work.weixin.qq.com/document/path/90236): with
// "enable_duplicate_check": 1, a message of the same content (the request's
// JSON) within an interval is not received again; duplicate_check_interval
// sets the interval, 1800 s by default, at most 4 hours. A SendFunc for it
// sets enable_duplicate_check to 1 and duplicate_check_interval to at least
// Window (1800, the default, for this preset); a Sender sends a reply again
// with the body of its record, byte for byte, so the platform drops the
// repeat. Two different replies of the same content to the same users within
// the interval are dropped too: that is WeCom's rule, not this package's.
var WeCom = Platform{Name: "wecom", Policy: Native, Window: 30 * time.Minute}

// Telegram is the Bot API's sendMessage, which takes no idempotency token:
// a reply whose send's outcome is unknown is not sent again (at most once),
// and is reported. [WithPolicy]([AtLeastOnce]) sends it again instead.
var Telegram = Platform{Name: "telegram", Policy: AtMostOnce}

// Slack is chat.postMessage, which takes no idempotency token: at most once
// by default, as [Telegram]. A message can carry metadata, which a
// [WithCheck] function can look for in the channel's history
// (conversations.history with include_all_metadata) to tell a reply that was
// posted from one that was not, before sending it again.
var Slack = Platform{Name: "slack", Policy: AtMostOnce}
