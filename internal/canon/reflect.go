package canon

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
)

// reflect writes a Go value of a type [walker.value] does not know, by its
// kind. Its children go through [walker.child], so the known types inside it
// (a json.Number in a typed map) are written as [AppendJSONValue] writes them.
// The value itself was counted by the caller.
func (w *walker) reflect(buf []byte, rv reflect.Value, depth int) []byte {
	switch rv.Kind() {
	case reflect.Invalid:
		return append(buf, 'n')
	case reflect.Bool:
		return appendBool(buf, rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var tmp [32]byte
		return appendNumberValue(buf, strconv.AppendInt(tmp[:0], rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		var tmp [32]byte
		return appendNumberValue(buf, strconv.AppendUint(tmp[:0], rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return appendFloatValue(buf, rv.Float(), rv.Type().Bits())
	case reflect.String:
		return appendString(buf, rv.String())
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return append(buf, 'n')
		}
		return w.child(buf, rv.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		return w.list(buf, rv, depth)
	case reflect.Map:
		return w.typedMap(buf, rv, depth)
	case reflect.Struct:
		return w.structValue(buf, rv, depth)
	}
	// Functions, channels, complex numbers, unsafe pointers: the type alone.
	return append(appendString(append(buf, '?'), rv.Type().String()), '.')
}

// child writes a member of a container read by reflection.
func (w *walker) child(buf []byte, rv reflect.Value, depth int) []byte {
	if rv.IsValid() && rv.CanInterface() {
		return w.value(buf, rv.Interface(), depth)
	}
	buf, ok := w.enter(buf, depth) // an unexported field: by reflection only
	if !ok {
		return buf
	}
	return w.reflect(buf, rv, depth)
}

// list writes a slice or array as a JSON array, and bytes as a string.
func (w *walker) list(buf []byte, rv reflect.Value, depth int) []byte {
	if rv.Kind() == reflect.Slice && rv.IsNil() {
		return append(buf, 'n')
	}
	if rv.Type().Elem().Kind() == reflect.Uint8 && rv.Kind() == reflect.Slice {
		return appendStringBytes(buf, rv.Bytes())
	}
	buf = append(buf, '[')
	for i := range rv.Len() {
		if buf = w.child(buf, rv.Index(i), depth+1); w.left < 0 {
			break
		}
	}
	return append(buf, ']')
}

// typedMap writes a map with string or integer keys as a JSON object, its
// keys by their text in sorted order, and any other map by its type.
func (w *walker) typedMap(buf []byte, rv reflect.Value, depth int) []byte {
	var text func(reflect.Value) string
	switch rv.Type().Key().Kind() {
	case reflect.String:
		text = reflect.Value.String
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		text = func(k reflect.Value) string { return strconv.FormatInt(k.Int(), 10) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		text = func(k reflect.Value) string { return strconv.FormatUint(k.Uint(), 10) }
	default:
		return append(appendString(append(buf, '?'), rv.Type().String()), '.')
	}
	if rv.IsNil() {
		return append(buf, 'n')
	}
	if rv.Len() > w.left {
		w.left = -1 // too big to sort and read
		return append(buf, '!', 'n')
	}
	type member struct {
		key string
		v   reflect.Value
	}
	mems := make([]member, 0, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		mems = append(mems, member{text(it.Key()), it.Value()})
	}
	slices.SortFunc(mems, func(a, b member) int { return cmp.Compare(a.key, b.key) })
	buf = append(buf, '{')
	for _, m := range mems {
		buf = appendString(buf, m.key)
		if buf = w.child(buf, m.v, depth+1); w.left < 0 {
			break
		}
	}
	return append(buf, '}')
}

// structValue writes a struct by its type name and all its fields in order.
func (w *walker) structValue(buf []byte, rv reflect.Value, depth int) []byte {
	t := rv.Type()
	buf = append(appendString(append(buf, '?'), t.String()), '{')
	for i := range t.NumField() {
		buf = appendString(buf, t.Field(i).Name)
		if buf = w.child(buf, rv.Field(i), depth+1); w.left < 0 {
			break
		}
	}
	return append(buf, '}')
}
