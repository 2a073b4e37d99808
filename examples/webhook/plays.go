package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// The bodies the demo delivers, shortened from the platforms' documentation
// (the full payloads, cited, are in platform/testdata and platform's tests).
const (
	telegramUpdate = `{"update_id": 870012345, "message": {"message_id": 42, "chat": {"id": -1001234567890, "type": "supergroup"}, "text": "hello bot"}}`
	slackEvent     = `{"token": "XXYYZZ", "team_id": "T0001", "type": "event_callback", "event_id": "Ev08MFMKH6", "event_time": 1764448112, "event": {"type": "app_mention", "text": "<@U0LAN0Z89> hi", "channel": "C0LAN2Q65"}}`
	slackHandshake = `{"token": "XXYYZZ", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}`
	feishuMessage  = `{"schema": "2.0", "header": {"event_id": "5e3702a84e847582be8db7fb73283c02", "event_type": "im.message.receive_v1", "create_time": "1764448112000", "app_id": "cli_9f5343c580712544"}, "event": {"sender": {"sender_id": {"open_id": "ou_84aad35d084aa403a838cf73ee18467"}, "sender_type": "user"}, "message": {"message_id": "om_5ce6d572455d361153b7cb51da133945", "chat_id": "oc_5ce6d572455d361153b7xx51da133945", "chat_type": "group", "message_type": "text", "content": "{\"text\":\"what is a lease?\"}"}}}`
	discordCommand = `{"type": 2, "id": "1187654321098765432", "application_id": "1122334455667788990", "token": "aW50ZXJhY3Rpb24", "guild_id": "290926798626357999", "channel_id": "645027906669510667", "member": {"user": {"id": "53908232506183680", "username": "ada"}}, "data": {"id": "771825006014889984", "name": "ask", "type": 1, "options": [{"type": 3, "name": "question", "value": "what is a lease?"}]}, "version": 1}`
	onebotMessage  = `{"time": 1764448112, "self_id": 3170000123, "post_type": "message", "message_type": "group", "sub_type": "normal", "message_id": -2117483012, "group_id": 736000111, "user_id": 1145141919, "message": [{"type": "text", "data": {"text": "what is a lease?"}}], "raw_message": "what is a lease?", "font": 0, "sender": {"user_id": 1145141919, "nickname": "Ada"}}`
	qqMessage      = `{"op": 0, "s": 42, "t": "GROUP_AT_MESSAGE_CREATE", "id": "GROUP_AT_MESSAGE_CREATE:ot3lpp6cmlvqxuhuaxkeg6tyg6wa4ubyjc1vv4z3agmb6qdczc7vdpgfcmfwm", "d": {"author": {"member_openid": "E4F4AEA33253A2797FB897C50B81D7ED"}, "content": " what is a lease?", "group_openid": "C9F778FE6ADF9D1D1DBE395BF744A33A", "id": "ROBOT1.0_veIKXLMrrlvNqLE6PTL5lH4KBqBbeLEJ8VNUm.YSHyzYD2X5V9Cxcaho1UkIkN.g", "timestamp": "2025-11-29T21:08:32+08:00"}}`
	// lineEvents has two events; a redelivery says so in deliveryContext.
	lineEvents = `{"destination": "xxxxxxxxxx", "events": [` +
		`{"type": "message", "message": {"type": "text", "id": "14353798921116", "text": "Hello, world"}, "timestamp": 1625665242211, "source": {"type": "user", "userId": "U80696558e1aa831"}, "replyToken": "757913772c4646b784d4b7ce46d12671", "mode": "active", "webhookEventId": "01FZ74A0TDDPYRVKNK77XKC3ZR", "deliveryContext": {"isRedelivery": false}},` +
		`{"type": "follow", "timestamp": 1625665242214, "source": {"type": "user", "userId": "Ufc729a925b3abef"}, "replyToken": "bb173f4d9cf64aed9d408ab4e36339ad", "mode": "active", "webhookEventId": "01FZ74ASS536FW97EX38NKCZQK", "deliveryContext": {"isRedelivery": false}}]}`
	metaWhatsApp = `{"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"}, "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": "16505551234"}], "messages": [` +
		`{"from": "16505551234", "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", "timestamp": "1749416383", "type": "text", "text": {"body": "Does it come in another color?"}},` +
		`{"from": "16505551234", "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUQ1OEQ1RDRDNEYzQjgwMkZCRgA=", "timestamp": "1749416400", "type": "reaction", "reaction": {"message_id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", "emoji": "👍"}}]}}]}]}`
	matrixTxn = `{"events": [` +
		`{"content": {"displayname": "Alice Margatroid", "membership": "join"}, "event_id": "$143273582443PhrSn:example.org", "origin_server_ts": 1432735824653, "room_id": "!jEsUZKDJdhlrceRyVU:example.org", "sender": "@example:example.org", "state_key": "@alice:example.org", "type": "m.room.member"},` +
		`{"content": {"body": "This is an example text message", "msgtype": "m.text"}, "event_id": "$143273582443PhrSo:example.org", "origin_server_ts": 1432735824653, "room_id": "!jEsUZKDJdhlrceRyVU:example.org", "sender": "@example:example.org", "type": "m.room.message"}]}`
	wechatText        = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>1234567890123456</MsgId></xml>`
	wecomText         = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>1234567890123456</MsgId><AgentID>1</AgentID></xml>`
	dingtalkRobot     = `{"conversationId": "cid6KeBBLoveMJOGXoYKF5x7EeiodoA==", "msgId": "msg0xxxxx", "senderNick": "Ada", "conversationType": "2", "createAt": 1613630252678, "msgtype": "text", "text": {"content": " what is a lease?"}}`
	dingtalkEvent     = `{"EventType": "user_add_org", "TimeStamp": "1764448112000", "UserId": ["manager7675"], "CorpId": "dinge8a565xxxx"}`
	standardWebhook   = `{"type": "contact.created", "timestamp": "2022-11-03T20:26:10.344522Z", "data": {"id": "1f81eb52-5198-4599-803e-771906343485"}}`
	githubPing        = `{"zen": "Anything added dilutes everything else.", "hook_id": 109948940, "repository": {"id": 186853261, "full_name": "Octocoders/Hello-World"}, "sender": {"login": "Codertocat", "id": 21031067}}`
	stripeEvent       = `{"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "object": "event", "api_version": "2019-02-19", "created": 1686089970, "data": {"object": {"id": "seti_1NG8Du2eZvKYlo2C9XMqbR0x", "object": "setup_intent"}}, "livemode": false, "type": "setup_intent.created"}`
	shopifyOrder      = `{"id": 820982911946154508, "email": "jon@example.com", "created_at": "2021-12-31T19:00:00-05:00", "total_price": "403.00", "currency": "USD"}`
	shopifyEventID    = "98880550-7158-44d4-b7cd-2c97c8a091b5"
	matrixTransaction = "/matrix/_matrix/app/v1/transactions/35"
)

// plays returns every platform's part, with the signers of sig (and of
// guess, for the forgeries) and the rule-built source's secret.
func plays(sig, guess map[string]*platformtest.Signer, ruleSecret string, now time.Time) []play {
	tg := signed("telegram", 1, telegramUpdate, 3, sig["telegram"], guess["telegram"], now)
	tg.concurrent = 2 // a delivery and a concurrent copy from a proxy's retry, then a late redelivery

	sl := signed("slack", 1, slackEvent, 2, sig["slack"], guess["slack"], now)
	sl.deliveries[1].header.Set("X-Slack-Retry-Num", "1")
	sl.deliveries[1].header.Set("X-Slack-Retry-Reason", "http_timeout")

	line := signed("line", 2, lineEvents, 1, sig["line"], guess["line"], now)
	redelivered := strings.ReplaceAll(lineEvents, `"isRedelivery": false`, `"isRedelivery": true`)
	line.deliveries = append(line.deliveries, post("/line", []byte(redelivered), sig["line"].Sign([]byte(redelivered), now)))

	matrix := signed("matrix", 2, matrixTxn, 2, sig["matrix"], guess["matrix"], now)
	for i := range matrix.deliveries {
		matrix.deliveries[i].method, matrix.deliveries[i].target = http.MethodPut, matrixTransaction
	}
	matrix.forged.method, matrix.forged.target = http.MethodPut, matrixTransaction

	// Feishu encrypts every event when the app has an Encrypt Key, and signs
	// the encrypted body.
	enc, forgedEnc := sig["feishu"].Encrypt([]byte(feishuMessage)), guess["feishu"].Encrypt([]byte(feishuMessage))
	feishu := signed("feishu", 1, string(enc), 2, sig["feishu"], guess["feishu"], now)
	feishu.forged = post("/feishu", forgedEnc, guess["feishu"].Sign(forgedEnc, now))

	shopify := play{source: "shopify", want: 1, forged: post("/shopify", []byte(shopifyOrder), shopifySign("guessed", shopifyEventID, []byte(shopifyOrder)))}
	for range 2 {
		shopify.deliveries = append(shopify.deliveries, post("/shopify", []byte(shopifyOrder), shopifySign(ruleSecret, shopifyEventID, []byte(shopifyOrder))))
	}

	return []play{
		tg, sl,
		feishu,
		signed("discord", 1, discordCommand, 2, sig["discord"], guess["discord"], now),
		signed("onebot", 1, onebotMessage, 2, sig["onebot"], guess["onebot"], now),
		signed("qq", 1, qqMessage, 2, sig["qq"], guess["qq"], now),
		line,
		signed("meta", 2, metaWhatsApp, 2, sig["meta"], guess["meta"], now),
		matrix,
		queried("wechat", wechatText, sig["wechat"], guess["wechat"], now),
		queried("wecom", wecomText, sig["wecom"], guess["wecom"], now),
		signed("dingtalk", 1, dingtalkRobot, 2, sig["dingtalk"], guess["dingtalk"], now),
		queried("dingtalk-events", dingtalkEvent, sig["dingtalk-events"], guess["dingtalk-events"], now),
		signed("webhooks", 1, standardWebhook, 2, sig["webhooks"], guess["webhooks"], now),
		signed("github", 1, githubPing, 2, sig["github"], guess["github"], now),
		signed("stripe", 1, stripeEvent, 2, sig["stripe"], guess["stripe"], now),
		shopify,
	}
}
