package kubectlget

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
)

// sortObjects orders objs by the value the JSONPath expression field finds
// in each (kubectl's --sort-by: numbers by value, strings byte by byte, an
// object without the field first).
func sortObjects(objs []Object, field string) ([]Object, error) {
	expr, err := relaxedJSONPath(field)
	if err != nil {
		return nil, err
	}
	p := jsonpath.New("sort").AllowMissingKeys(true)
	if err := p.Parse(expr); err != nil {
		return nil, fmt.Errorf("--sort-by %s: %w", field, err)
	}
	keys := make(map[Object]reflect.Value, len(objs))
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		vs, err := p.FindResults(m)
		if err != nil {
			return nil, fmt.Errorf("--sort-by %s: %w", field, err)
		}
		if len(vs) > 0 && len(vs[0]) > 0 {
			v := vs[0][0]
			if v.Kind() == reflect.Interface && !v.IsNil() {
				v = v.Elem()
			}
			keys[o] = v
		}
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b Object) int {
		ka, oka := keys[a]
		kb, okb := keys[b]
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		}
		return compareValues(ka, kb)
	})
	return out, nil
}

// compareValues orders two values found by --sort-by.
func compareValues(a, b reflect.Value) int {
	switch {
	case isNumber(a) && isNumber(b):
		fa, fb := number(a), number(b)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	case a.Kind() == reflect.String && b.Kind() == reflect.String:
		return strings.Compare(a.String(), b.String())
	}
	return strings.Compare(fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface()))
}

func isNumber(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func number(v reflect.Value) float64 {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	}
	return float64(v.Int())
}
