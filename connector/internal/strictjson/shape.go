package strictjson

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// shape is what encoding/json decodes a JSON value into, as far as member
// names go: a struct's members by their exact names, and the shape of the
// values of a slice, array or map. A nil *shape is a value whose member
// names are free (a map's keys are compared exactly; an interface, a
// json.RawMessage or a custom decoder takes any).
type shape struct {
	fields map[string]*shape // a struct: member name → the shape of its value
	elem   *shape            // a slice, array or map: the shape of its elements
}

// member is the shape of the value of member name in an object of shape
// s, and, when encoding/json would take name for a struct field spelled
// otherwise ("Name" for "name": it matches names without regard to case,
// Unicode folding included), that field's name.
func (s *shape) member(name string) (*shape, string) {
	switch {
	case s == nil:
		return nil, ""
	case s.fields == nil:
		return s.elem, ""
	}
	if f, ok := s.fields[name]; ok {
		return f, ""
	}
	for field := range s.fields {
		if strings.EqualFold(field, name) {
			return nil, field
		}
	}
	return nil, ""
}

// element is the shape of an element of an array of shape s.
func (s *shape) element() *shape {
	if s == nil {
		return nil
	}
	return s.elem
}

var shapes sync.Map // reflect.Type → *shape

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf is the shape of the values of type t.
func shapeOf(t reflect.Type) *shape {
	if t == nil {
		return nil
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

// buildShape builds the shape of t; seen holds the shapes being built, so
// that a recursive type refers to itself.
func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := seen[t]; ok {
		return s
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		s := &shape{fields: map[string]*shape{}}
		seen[t] = s
		addFields(s, t, seen)
		return s
	case reflect.Slice, reflect.Array, reflect.Map:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return nil // []byte: a base64 string
		}
		elem := buildShape(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return &shape{elem: elem}
	}
	return nil
}

// addFields adds the members of struct t to s, those of its embedded
// structs without a name of their own included, as encoding/json reads
// them.
func addFields(s *shape, t reflect.Type, seen map[reflect.Type]*shape) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.fields[name] = buildShape(f.Type, seen)
	}
}
