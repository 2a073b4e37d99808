package canon

import (
	"encoding/json"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type node struct {
	Name string
	Next *node
	tag  int
}

// TestValueLimits checks that values that contain themselves, huge values
// and values JSON cannot hold give a bounded, stable form.
func TestValueLimits(t *testing.T) {
	self := map[string]any{"a": 1}
	self["self"] = self
	twice := map[string]any{}
	twice["l"], twice["r"] = twice, twice
	loop := make([]any, 2)
	loop[0], loop[1] = "x", loop
	ring := &node{Name: "a", tag: 1}
	ring.Next = &node{Name: "b", Next: ring}
	huge := make(map[string]any, MaxValues+1)
	for i := range MaxValues + 1 {
		huge[strconv.Itoa(i)] = i
	}
	for name, tt := range map[string]struct {
		v       any
		markers []string
	}{
		"map containing itself":         {self, []string{"!d"}},
		"map containing itself twice":   {twice, []string{"!n"}},
		"slice containing itself":       {loop, []string{"!d"}},
		"pointer cycle through structs": {ring, []string{"?", "s10:canon.node{", "!d"}},
		"map too big to read":           {huge, []string{"!n"}},
		"function":                      {func() {}, []string{"?s6:func()."}},
		"channel in a map":              {map[string]any{"c": make(chan int)}, []string{"?s8:chan int."}},
		"NaN":                           {math.NaN(), []string{"?s7:float64s3:NaN"}},
		"invalid raw JSON":              {json.RawMessage("{x"), []string{"?s15:json.RawMessages2:{x"}},
	} {
		t.Run(name, func(t *testing.T) {
			a := AppendJSONValue(nil, tt.v)
			b := AppendJSONValue(nil, tt.v)
			require.Equal(t, string(a), string(b), "not stable")
			assert.Less(t, len(a), 64*MaxValues, "form of %d bytes", len(a))
			for _, m := range tt.markers {
				assert.True(t, strings.Contains(string(a), m), "no %q in the form", m)
			}
		})
	}
}

// TestValueBytes checks the bound in bytes: one 16 KiB string referenced
// 20,000 times (well within MaxValues' count) used to give a form of 320 MiB
// and allocate 1.4-1.9 GiB; the form now stops past MaxSize with a marker,
// and what is allocated stays within a few times MaxSize.
func TestValueBytes(t *testing.T) {
	big := strings.Repeat("x", 16<<10)
	refs := make([]any, 20000)
	for i := range refs {
		refs[i] = big
	}
	raw := make([]any, 20000)
	rawBig := json.RawMessage(`"` + big + `"`)
	for i := range raw {
		raw[i] = rawBig
	}
	for name, v := range map[string]any{
		"string":              refs,
		"raw JSON":            raw,
		"map of references":   map[string]any{"a": refs, "b": refs},
		"struct of reference": struct{ A, B []any }{refs, refs},
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			form := AppendJSONValue(nil, v)
			runtime.ReadMemStats(&after)
			allocs := after.TotalAlloc - before.TotalAlloc
			assert.Greater(t, len(form), MaxSize, "the form was cut past MaxSize")
			assert.LessOrEqual(t, len(form), MaxSize+len(big)+64, "at most one value past MaxSize")
			assert.Contains(t, string(form[len(form)-8:]), "!b", "the marker ends the form")
			assert.Less(t, allocs, uint64(8*MaxSize), "bytes allocated")
			scalar := AppendScalar(nil, v)
			assert.LessOrEqual(t, len(scalar), MaxSize+len(big)+64, "as an id")
		})
	}
}

// TestValueTyped checks that typed maps and slices read by reflection give
// the form of their JSON text, and that structs are told apart by type.
func TestValueTyped(t *testing.T) {
	for _, tt := range []struct {
		v    any
		text string
	}{
		{map[string]string{"b": "2", "a": "1"}, `{"a":"1","b":"2"}`},
		{map[int]any{2: "x", 10: []int{1, 2}}, `{"10":[1,2],"2":"x"}`},
		{[]map[string]json.Number{{"n": "1.0"}}, `[{"n":1}]`},
		{&[]string{"p"}, `["p"]`},
		{[]byte("hi"), `"hi"`},
		{[]int(nil), `null`},
		{map[string]*int{"nil": nil}, `{"nil":null}`},
	} {
		want, ok := AppendJSONText(nil, tt.text)
		require.True(t, ok)
		assert.Equal(t, string(want), string(AppendJSONValue(nil, tt.v)), "%#v", tt.v)
	}
	type other node
	assert.NotEqual(t, string(AppendJSONValue(nil, node{Name: "a"})), string(AppendJSONValue(nil, other{Name: "a"})))
	assert.NotEqual(t, string(AppendJSONValue(nil, node{tag: 1})), string(AppendJSONValue(nil, node{tag: 2})), "unexported fields count")
}

// TestScalarOfHostileValue checks that an id or text that is a Go value of
// another kind is written by the bounded walk, after a NUL byte.
func TestScalarOfHostileValue(t *testing.T) {
	self := map[string]any{}
	self["self"] = self
	got := AppendScalar(nil, self)
	assert.Equal(t, byte(0), got[0])
	assert.Contains(t, string(got), "!d")
	assert.Equal(t, "\x00?s10:complex128.", string(AppendScalar(nil, complex(1, 2))))
}

// FuzzValueGraph builds graphs of maps and slices from the input, with edges
// back to earlier nodes and to themselves, so most graphs have cycles, and
// checks that AppendJSONValue ends with a stable, bounded form, and
// AppendScalar likewise.
func FuzzValueGraph(f *testing.F) {
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{1, 0, 1, 2, 0, 1, 0, 0})
	f.Add([]byte{0, 1, 1, 0, 0, 2, 1, 1, 1, 0, 0, 3})
	f.Add([]byte("deeply nested and cyclic"))
	f.Fuzz(func(t *testing.T, in []byte) {
		root := buildGraph(in)
		a, b := AppendJSONValue(nil, root), AppendJSONValue(nil, root)
		require.Equal(t, string(a), string(b), "form not stable")
		require.LessOrEqual(t, len(a), 64*MaxValues, "form length")
		s1, s2 := AppendScalar(nil, root), AppendScalar(nil, root)
		require.Equal(t, string(s1), string(s2), "scalar form not stable")
	})
}

// buildGraph reads the input as a list of nodes, each a kind byte (map,
// slice, typed map, pointer to a struct, or a leaf) and a count of edges, each
// edge a byte naming a node up to and including itself.
func buildGraph(in []byte) any {
	type built struct {
		v     any
		edges []int
	}
	var nodes []*built
	for len(in) >= 2 && len(nodes) < 64 {
		kind, n := in[0]%5, int(in[1]%8)
		in = in[2:]
		b := &built{}
		for range n {
			if len(in) == 0 {
				break
			}
			b.edges = append(b.edges, int(in[0])%(len(nodes)+1))
			in = in[1:]
		}
		switch kind {
		case 0:
			b.v = map[string]any{}
		case 1:
			b.v = make([]any, len(b.edges))
		case 2:
			b.v = map[int]any{}
		case 3:
			b.v = &struct{ Kids []any }{Kids: make([]any, len(b.edges))}
		default:
			b.v = string(rune('a' + len(nodes)%26))
		}
		nodes = append(nodes, b)
	}
	for i, b := range nodes {
		for j, e := range b.edges {
			child := nodes[e].v
			switch v := b.v.(type) {
			case map[string]any:
				v[string(rune('a'+j))] = child
			case []any:
				v[j] = child
			case map[int]any:
				v[j*7-i] = child
			case *struct{ Kids []any }:
				v.Kids[j] = child
			}
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes[0].v
}
