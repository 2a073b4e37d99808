package platform

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// WXBizMsgCrypt, the message encryption that WeChat Official Accounts ("safe
// mode", 安全模式), WeCom and DingTalk's HTTP event subscriptions share
// (WeChat Official Accounts, "Message encryption and decryption" (消息加解密说明),
// https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Message_encryption_and_decryption_instructions.html;
// WeCom, "加解密方案说明", https://developer.work.weixin.qq.com/document/path/90968;
// Tencent's sample code WXBizMsgCrypt.py, and open-dingtalk/DingTalk-Callback-Crypto,
// do the same):
//
//   - The EncodingAESKey is 43 characters, the base64 of a 32-byte AES-256
//     key without its "="; the IV is the key's first 16 bytes.
//   - The ciphertext is base64(AES-256-CBC(random(16) ‖ uint32 big-endian
//     length of msg ‖ msg ‖ receiver id)), PKCS#7-padded to a multiple of 32
//     bytes. The receiver id is the AppID (WeChat), the CorpID or suite id
//     (WeCom), the AppKey, CorpId or suiteKey (DingTalk).
//   - The signature is the hex SHA-1 of token, timestamp, nonce and the
//     ciphertext, sorted as strings and concatenated (msg_signature).
//
// CBC has no MAC of its own: the signature, keyed with the token, is what
// authenticates the ciphertext, so it is checked before anything is
// decrypted. Every failure to decrypt (base64, length, padding, length field,
// receiver id) gives the same error, and the padding is checked in constant
// time, so that the answers do not make a padding oracle. The receiver id is
// checked on every plaintext: a ciphertext another app or corp received does
// not pass as this one's.

// msgCryptBlock is the PKCS#7 block of WXBizMsgCrypt: 32 bytes, not AES's 16.
const msgCryptBlock = 32

// msgCrypt holds one WXBizMsgCrypt configuration.
type msgCrypt struct {
	token    string
	key      []byte // 32 bytes
	receiver string
}

// newMsgCrypt checks and decodes a WXBizMsgCrypt configuration.
func newMsgCrypt(name, token, encodingAESKey, receiverID string) (*msgCrypt, error) {
	switch {
	case token == "":
		return nil, unauthenticated(name, "token is empty")
	case receiverID == "":
		return nil, unauthenticated(name, "receiver id is empty")
	case len(encodingAESKey) != 43:
		return nil, unauthenticated(name, fmt.Sprintf("EncodingAESKey is %d characters, not 43", len(encodingAESKey)))
	}
	key, err := base64.StdEncoding.DecodeString(encodingAESKey + "=")
	if err != nil || len(key) != 32 {
		return nil, unauthenticated(name, "EncodingAESKey is not the base64 of 32 bytes")
	}
	return &msgCrypt{token: token, key: key, receiver: receiverID}, nil
}

// wxSign returns the hex SHA-1 of parts, sorted and concatenated: the
// signature of WeChat's plain mode (token, timestamp, nonce) and
// msg_signature (the same and the ciphertext).
func wxSign(parts ...string) []byte {
	sorted := append([]string(nil), parts...)
	sort.Strings(sorted)
	sum := sha1.Sum([]byte(strings.Join(sorted, "")))
	return sum[:]
}

// checkWXSign checks the hex signature got of parts in constant time.
func checkWXSign(name, param, got string, parts ...string) error {
	if got == "" {
		return unauthenticated(name, "request has no "+param)
	}
	if !equalHex(got, wxSign(parts...)) {
		return unauthenticated(name, param+" does not match")
	}
	return nil
}

// errDecrypt is what decrypt reports, whatever failed.
var errDecrypt = errors.New("does not decrypt with the EncodingAESKey and receiver id")

// decrypt returns the msg inside the base64 ciphertext encrypt, after
// checking its padding, its length field and its receiver id. Whatever fails,
// it returns errDecrypt alone.
func (c *msgCrypt) decrypt(encrypt string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(encrypt)
	if err != nil || len(data) < msgCryptBlock || len(data)%aes.BlockSize != 0 {
		return nil, errDecrypt
	}
	block, err := aes.NewCipher(c.key)
	if err != nil {
		return nil, errDecrypt
	}
	cipher.NewCBCDecrypter(block, c.key[:aes.BlockSize]).CryptBlocks(data, data)
	plain, padded := unpad(data, msgCryptBlock)
	if !padded || len(plain) < 20 {
		return nil, errDecrypt
	}
	n := binary.BigEndian.Uint32(plain[16:20])
	if uint64(n) > uint64(len(plain)-20) {
		return nil, errDecrypt
	}
	msg, receiver := plain[20:20+n], plain[20+n:]
	if subtle.ConstantTimeCompare(receiver, []byte(c.receiver)) != 1 {
		return nil, errDecrypt
	}
	return msg, nil
}

// encrypt returns the base64 ciphertext of msg, with 16 bytes of random as
// its prefix: what the platform sends, and what a reply to it holds.
func (c *msgCrypt) encrypt(msg []byte, random io.Reader) (string, error) {
	plain := make([]byte, 20, 20+len(msg)+len(c.receiver)+msgCryptBlock)
	if _, err := io.ReadFull(random, plain[:16]); err != nil {
		return "", fmt.Errorf("dedupe: platform: random: %w", err)
	}
	binary.BigEndian.PutUint32(plain[16:20], uint32(len(msg)))
	plain = append(plain, msg...)
	plain = append(plain, c.receiver...)
	pad := msgCryptBlock - len(plain)%msgCryptBlock
	for range pad {
		plain = append(plain, byte(pad))
	}
	block, err := aes.NewCipher(c.key)
	if err != nil {
		return "", err
	}
	cipher.NewCBCEncrypter(block, c.key[:aes.BlockSize]).CryptBlocks(plain, plain)
	return base64.StdEncoding.EncodeToString(plain), nil
}
