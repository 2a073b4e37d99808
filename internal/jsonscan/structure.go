package jsonscan

// Open reads the '{' or '[' that Peek returned and reports whether the
// object or array is empty, in which case its closing byte is read too.
func (s *Scanner[T]) Open() (empty bool) {
	closer := s.src[s.pos] + 2 // '{'+2 is '}', '['+2 is ']'
	s.pos++
	if s.Peek() == closer {
		s.pos++
		return true
	}
	return false
}

// Colon reads the ':' between a member's name, read by [Scanner.Quoted],
// and its value.
func (s *Scanner[T]) Colon() bool {
	if s.Peek() != ':' {
		return false
	}
	s.pos++
	return true
}

// name reads a member's name and the ':' after it.
func (s *Scanner[T]) name() bool {
	if s.Peek() != '"' {
		return false
	}
	_, _, ok := s.Quoted()
	return ok && s.Colon()
}

// Next reads what follows a member or an element: a ',' (more is true) or
// closer, the '}' or ']' that ends the object or array. ok is false for
// anything else.
func (s *Scanner[T]) Next(closer byte) (more, ok bool) {
	switch s.Peek() {
	case ',':
		s.pos++
		return true, true
	case closer:
		s.pos++
		return false, true
	}
	return false, false
}

// scalar reads a string, a number or a literal.
func (s *Scanner[T]) scalar() bool {
	if s.pos >= len(s.src) {
		return false
	}
	switch c := s.src[s.pos]; {
	case c == '"':
		_, _, ok := s.Quoted()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		_, ok := s.Number()
		return ok
	}
	return s.Literal()
}

// Skip reads one value, after whitespace, and returns its text. Objects and
// arrays may nest at most maxDepth deep, the value itself counted: 0 allows
// scalars only. Member names are checked as strings, never compared, so
// repeated names are valid here. Skip walks the value without recursion.
func (s *Scanner[T]) Skip(maxDepth int) (T, bool) {
	var stack [64]byte
	closers := stack[:0] // the closing bytes of the containers open
	start := SkipSpace(s.src, s.pos)
	for {
		switch c := s.Peek(); c {
		case '{', '[':
			if len(closers) >= maxDepth {
				return s.src[:0], false
			}
			if s.Open() {
				break // an empty container is a whole value
			}
			closers = append(closers, c+2)
			if c == '{' && !s.name() {
				return s.src[:0], false
			}
			continue // to the first value inside
		case 0:
			return s.src[:0], false
		default:
			if !s.scalar() {
				return s.src[:0], false
			}
		}
		// A value ended: read the ',' or the closers that follow it.
		for {
			if len(closers) == 0 {
				return s.src[start:s.pos], true
			}
			closer := closers[len(closers)-1]
			more, ok := s.Next(closer)
			if !ok {
				return s.src[:0], false
			}
			if !more {
				closers = closers[:len(closers)-1]
				continue
			}
			if closer == '}' && !s.name() {
				return s.src[:0], false
			}
			break
		}
	}
}

// Valid reports whether src is one JSON value, with whitespace around it
// allowed, whose objects and arrays nest at most maxDepth deep.
func Valid[T Text](src T, maxDepth int) bool {
	s := NewScanner(src)
	_, ok := s.Skip(maxDepth)
	return ok && s.AtEnd()
}
