package model

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// TestEqualIsDeepEqual: from an object with every field set, each variant
// that changes one field anywhere inside it (a value, a list or map made
// nil, empty, longer or different, a pointer made nil or different) is
// Equal to the object exactly when reflect.DeepEqual says so. Fields are
// found by reflection: one added to a type and left out of its Equal fails
// here.
func TestEqualIsDeepEqual(t *testing.T) {
	check := func(name string, full any, equal func(a, b any) bool) {
		base := reflect.ValueOf(full)
		if !equal(full, clone(base).Interface()) {
			t.Errorf("%s: not Equal to its copy", name)
		}
		vs := variants(base)
		if len(vs) < 10 {
			t.Fatalf("%s: only %d variants", name, len(vs))
		}
		for _, v := range vs {
			other := v.v.Interface()
			want := reflect.DeepEqual(full, other)
			if got := equal(full, other); got != want {
				t.Errorf("%s, %s: Equal = %v, reflect.DeepEqual = %v", name, v.path, got, want)
			}
			if got := equal(other, full); got != want {
				t.Errorf("%s, %s (reversed): Equal = %v, reflect.DeepEqual = %v", name, v.path, got, want)
			}
		}
	}
	check("Service", filled(reflect.TypeFor[*Service]()).Interface(),
		func(a, b any) bool { return a.(*Service).Equal(b.(*Service)) })
	check("EndpointSlice", filled(reflect.TypeFor[*EndpointSlice]()).Interface(),
		func(a, b any) bool { return a.(*EndpointSlice).Equal(b.(*EndpointSlice)) })
	check("ServiceState", filled(reflect.TypeFor[*ServiceState]()).Interface(),
		func(a, b any) bool { return a.(*ServiceState).Equal(b.(*ServiceState)) })
	var nilSvc *Service
	if !nilSvc.Equal(nil) || nilSvc.Equal(&Service{}) || (&Service{}).Equal(nil) {
		t.Error("a nil Service is Equal only to nil")
	}
}

var (
	addrType   = reflect.TypeFor[netip.Addr]()
	prefixType = reflect.TypeFor[netip.Prefix]()
)

// filled returns a value of type t with every field set (a list or map of
// one filled element).
func filled(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch {
	case t == addrType:
		v.Set(reflect.ValueOf(netip.MustParseAddr("10.0.0.1")))
		return v
	case t == prefixType:
		v.Set(reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/8")))
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			v.Field(i).Set(filled(t.Field(i).Type))
		}
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(filled(t.Elem()))
		v.Set(p)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), filled(t.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(filled(t.Key()), filled(t.Elem()))
	case reflect.String:
		v.SetString("a")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	default:
		panic(fmt.Sprintf("filled: %s not handled", t))
	}
	return v
}

// clone returns a deep copy of v.
func clone(v reflect.Value) reflect.Value {
	t := v.Type()
	out := reflect.New(t).Elem()
	switch {
	case t == addrType || t == prefixType:
		out.Set(v)
		return out
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			out.Field(i).Set(clone(v.Field(i)))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			p := reflect.New(t.Elem())
			p.Elem().Set(clone(v.Elem()))
			out.Set(p)
		}
	case reflect.Slice:
		if !v.IsNil() {
			s := reflect.MakeSlice(t, v.Len(), v.Len())
			for i := range v.Len() {
				s.Index(i).Set(clone(v.Index(i)))
			}
			out.Set(s)
		}
	case reflect.Map:
		if !v.IsNil() {
			m := reflect.MakeMap(t)
			for _, k := range v.MapKeys() {
				m.SetMapIndex(k, clone(v.MapIndex(k)))
			}
			out.Set(m)
		}
	default:
		out.Set(v)
	}
	return out
}

type variant struct {
	path string
	v    reflect.Value
}

// variants returns copies of v that each differ from it in one place.
func variants(v reflect.Value) []variant {
	t := v.Type()
	var out []variant
	add := func(path string, x reflect.Value) { out = append(out, variant{path, x}) }
	switch {
	case t == addrType:
		add("", reflect.ValueOf(netip.MustParseAddr("10.0.0.2")))
		add("zero", reflect.Zero(t))
		return out
	case t == prefixType:
		add("", reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/9")))
		return out
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			for _, fv := range variants(v.Field(i)) {
				c := clone(v)
				c.Field(i).Set(fv.v)
				add(join(t.Field(i).Name, fv.path), c)
			}
		}
	case reflect.Pointer:
		add("nil", reflect.Zero(t))
		if !v.IsNil() {
			for _, ev := range variants(v.Elem()) {
				p := reflect.New(t.Elem())
				p.Elem().Set(ev.v)
				add(join("*", ev.path), p)
			}
		}
	case reflect.Slice:
		add("nil", reflect.Zero(t))
		add("empty", reflect.MakeSlice(t, 0, 0))
		add("longer", reflect.Append(clone(v), filled(t.Elem())))
		if v.Len() > 0 {
			for _, ev := range variants(v.Index(0)) {
				c := clone(v)
				c.Index(0).Set(ev.v)
				add(join("[0]", ev.path), c)
			}
		}
	case reflect.Map:
		add("nil", reflect.Zero(t))
		add("empty", reflect.MakeMap(t))
		for _, k := range v.MapKeys() {
			for _, ev := range variants(v.MapIndex(k)) {
				c := clone(v)
				c.SetMapIndex(k, ev.v)
				add(join("["+k.String()+"]", ev.path), c)
			}
			c := clone(v)
			c.SetMapIndex(reflect.ValueOf(k.String()+"x"), v.MapIndex(k))
			add("extra key", c)
		}
	case reflect.String:
		add("", reflect.ValueOf(v.String()+"b").Convert(t))
	case reflect.Bool:
		add("", reflect.ValueOf(!v.Bool()).Convert(t))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		add("", reflect.ValueOf(v.Int()+1).Convert(t))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		add("", reflect.ValueOf(v.Uint()+1).Convert(t))
	default:
		panic(fmt.Sprintf("variants: %s not handled", t))
	}
	return out
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "." + b
}
