package dedupewatermill

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Produced messages come back exactly: UUID, every metadata field and the
// payload, bytes that are not UTF-8 included.
func TestCodecRoundTrip(t *testing.T) {
	a := message.NewMessage("a", []byte("payload \xff"))
	a.Metadata.Set("k", "v\x00\xfe")
	a.Metadata.Set("", "")
	b := message.NewMessage("", nil)
	enc, err := encode([]*message.Message{a, b})
	require.NoError(t, err)
	got, err := decode(enc)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, a.Equals(got[0]), "first message")
	assert.True(t, b.Equals(got[1]), "second message")

	enc, err = encode(nil)
	require.NoError(t, err)
	assert.Nil(t, enc, "no message: no result")
	got, err = decode(nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	_, err = encode([]*message.Message{nil})
	assert.Error(t, err)
}

// Bytes that encode did not write are refused with errCorrupt, never a panic.
func TestCodecCorrupt(t *testing.T) {
	enc, err := encode([]*message.Message{message.NewMessage("a", []byte("xyz"))})
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"version":    {2, 0},
		"truncated":  enc[:len(enc)-1],
		"trailing":   append(append([]byte{}, enc...), 0),
		"huge count": {codecVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad varint": {codecVersion, 0xff},
	} {
		_, err := decode(b)
		assert.ErrorIs(t, err, errCorrupt, name)
	}
}

func FuzzDecode(f *testing.F) {
	enc, _ := encode([]*message.Message{message.NewMessage("a", []byte("xyz"))})
	f.Add(enc)
	f.Add([]byte{codecVersion, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decode(b)
		if err != nil {
			return
		}
		again, err := encode(msgs)
		require.NoError(t, err)
		back, err := decode(again)
		require.NoError(t, err)
		require.Len(t, back, len(msgs))
		for i := range msgs {
			require.True(t, msgs[i].Equals(back[i]))
		}
	})
}
